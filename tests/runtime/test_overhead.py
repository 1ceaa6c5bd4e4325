"""single_worker_overhead_ratio on a real local Ray instance: both sides train the same
workload the same number of epochs, interleaved, and learn."""

from __future__ import annotations

import pytest

from edgewise.nn.workload import DIGITS
from edgewise.runtime.overhead import Overhead, single_worker_overhead_ratio

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_engine_and_plain_loop_are_measured_in_pairs() -> None:
    result = single_worker_overhead_ratio(DIGITS, batch_size=64, epochs=3)  # digits: quick
    assert len(result.engine_samples_per_second) == len(result.plain_samples_per_second) == 3
    assert all(r > 0 for r in (*result.engine_samples_per_second,
                               *result.plain_samples_per_second))
    # the same model, data, optimiser and seed learn on both sides (chance is 0.1)
    assert result.engine_val_accuracy > 0.8 and result.plain_val_accuracy > 0.8


def test_the_ratio_is_the_median_of_the_paired_epochs() -> None:
    """Epoch i of the engine is divided by epoch i of the plain loop, then the median is
    taken: not the ratio of the medians (here 200/150), which a drifting host would skew."""
    result = Overhead(engine_samples_per_second=(100.0, 300.0, 200.0),
                      plain_samples_per_second=(100.0, 100.0, 200.0), batch_size=64,
                      engine_val_accuracy=0.9, plain_val_accuracy=0.9)
    assert result.pair_ratios == (1.0, 3.0, 1.0)
    assert result.ratio == 1.0
    assert (result.engine_median, result.plain_median) == (200.0, 100.0)
