"""Real profile traces measured on digits streams, written in the simulator's CSV format."""

from __future__ import annotations

from pathlib import Path

from edgewise.continual.problem import RetrainConfig
from edgewise.continual.profiles import load_trace
from edgewise.continual.realprofiles import SUBSAMPLING, write_real_trace


def test_real_trace_round_trips_through_csv(tmp_path: Path) -> None:
    configs = [RetrainConfig(2, 32, 64, 3, 0.25), RetrainConfig(4, 32, 64, 0, 1.0)]
    write_real_trace(tmp_path, n_streams=1, n_windows=2, configs=configs)
    trace = load_trace(tmp_path)
    assert trace.streams == ("cam0",) and trace.windows == 2
    cheap = trace.curves[(1, "cam0", configs[0].name)]
    rich = trace.curves[(1, "cam0", configs[1].name)]
    assert len(cheap.accuracy) == 3 and len(rich.accuracy) == 5  # start + one per epoch
    assert cheap.compute_s[0] == 0.0 and rich.cost_s > cheap.cost_s  # real compute measured
    assert cheap.accuracy[0] == rich.accuracy[0]  # both start from the deployed model
    assert trace.retained[(1, "cam0")] > 0.0
    factors = trace.inference_factor["cam0"]
    assert len(factors) == len(SUBSAMPLING) and factors[-1] < factors[0]
