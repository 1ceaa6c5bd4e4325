"""Recording a real profile trace from the digits streams (small: 1 stream, 2 windows, 2
configurations), written and read back in the simulator's CSV format."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgewise.continual.problem import RetrainConfig
from edgewise.continual.profiles import load_trace, write_trace
from edgewise.continual.traces import RATES, record_digits_trace


def test_recorded_trace_has_the_stretch_rule_and_round_trips(tmp_path: Path) -> None:
    configs = (RetrainConfig(2, 32, 64, 3, 0.25), RetrainConfig(4, 32, 64, 0, 1.0))
    trace = load_trace(write_trace(record_digits_trace(
        1, n_windows=2, configs=configs, window_s=50.0), tmp_path))
    assert trace.streams == ("cam0",) and trace.windows == 2
    cheap, rich = (trace.curves[(1, "cam0", c.name)] for c in configs)
    assert len(cheap.accuracy) == 3 and len(rich.accuracy) == 5  # start + one per epoch
    assert cheap.compute_s[0] == rich.compute_s[0] == 0.0
    assert cheap.accuracy[0] == rich.accuracy[0]  # both start from the deployed model
    # one stretch for the whole recording: the costliest configuration is 2 windows
    costliest = max(c.cost_s for c in trace.curves.values())
    assert costliest == pytest.approx(2 * 50.0, rel=1e-4)
    assert rich.cost_s > cheap.cost_s  # 4 epochs on all the data vs 2 on a quarter
    assert trace.retained[(1, "cam0")] > 0.0 and trace.demand["cam0"] > 0.0
    factors = trace.inference_factor["cam0"]
    assert trace.subsampling == RATES and factors[0] == pytest.approx(1.0)
    assert all(0.0 <= f <= 1.0 for f in factors)
