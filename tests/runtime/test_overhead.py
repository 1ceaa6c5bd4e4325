"""single_worker_overhead_ratio on a real local Ray instance: both sides train the same
workload the same number of epochs, interleaved, and learn."""

from __future__ import annotations

import pytest

from edgewise.nn.workload import DIGITS
from edgewise.runtime.overhead import single_worker_overhead_ratio

pytestmark = pytest.mark.ray


def test_engine_and_plain_loop_are_measured_in_pairs() -> None:
    result = single_worker_overhead_ratio(DIGITS, batch_size=64, epochs=3)  # digits: quick
    assert len(result.engine_samples_per_second) == len(result.plain_samples_per_second) == 3
    assert all(r > 0 for r in (*result.engine_samples_per_second,
                               *result.plain_samples_per_second))
    assert min(result.pair_ratios) <= result.ratio <= max(result.pair_ratios)
    # the same model, data, optimiser and seed learn on both sides (chance is 0.1)
    assert result.engine_val_accuracy > 0.8 and result.plain_val_accuracy > 0.8
