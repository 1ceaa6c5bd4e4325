"""The problem types, the default grids and EstimateAccuracy (Algorithm 2 line 7)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.continual.estimate import estimate_accuracy, inference_factor, pick_inference
from edgewise.continual.problem import (
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
    default_inference_configs,
    default_retrain_configs,
)
from edgewise.errors import ConfigError

RATES = (1.0, 0.75, 0.5, 0.25, 0.1)
INFER = tuple(InferenceOption(f"s{r}", r, r) for r in RATES)


def test_default_grids_have_the_papers_size_and_unique_names() -> None:
    retrain = default_retrain_configs()
    assert len(retrain) >= 18
    assert len({c.name for c in retrain}) == len(retrain)
    assert len({c.name for c in default_inference_configs()}) == len(default_inference_configs())


def test_estimate_matches_figure_4_numbers() -> None:
    # Cfg2B at 1 GPU takes 50 s of the 120 s window: 50% before, 85% after, full-rate inference
    est = estimate_accuracy(0.5, RetrainOption("Cfg2", 0.85, 50.0), 1.0, 1.0, 120.0)
    assert est == pytest.approx((0.5 * 50 + 0.85 * 70) / 120)
    # half a GPU doubles the time; inference at 3/4 of its demand keeps 3/4 of the accuracy
    est = estimate_accuracy(0.5, RetrainOption("Cfg2", 0.85, 50.0), 0.75, 0.5, 120.0)
    assert est == pytest.approx(0.75 * (0.5 * 100 + 0.85 * 20) / 120)
    assert inference_factor(INFER[0], 0.75) == pytest.approx(0.75)


def test_estimate_rejects_retraining_that_cannot_finish() -> None:
    assert estimate_accuracy(0.5, RetrainOption("c", 0.9, 130.0), 1.0, 1.0, 120.0) is None
    assert estimate_accuracy(0.5, RetrainOption("c", 0.9, 10.0), 1.0, 0.0, 120.0) is None
    assert estimate_accuracy(0.6, None, 0.5, 0.0, 120.0) == pytest.approx(0.3)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(1.0, 500.0), st.floats(0.01, 4.0))
def test_estimate_lies_between_old_and_new_accuracy(old: float, new: float, cost: float,
                                                    share: float) -> None:
    est = estimate_accuracy(old, RetrainOption("c", new, cost), 1.0, share, 200.0)
    if cost / share > 200.0:
        assert est is None
    else:
        assert est is not None
        assert min(old, new) - 1e-9 <= est <= max(old, new) + 1e-9


def test_pick_inference_flags_the_a_min_floor() -> None:
    stream = StreamState("B", 0.5, (), INFER)
    lam, ok = pick_inference(stream, 0.75, 0.4)
    assert lam.config == "s1.0" or inference_factor(lam, 0.75) == pytest.approx(0.75)
    assert not ok  # 50% × 0.75 = 37.5% < 40%
    assert pick_inference(stream, 1.0, 0.4)[1]


def test_problem_validation_names_the_field() -> None:
    stream = StreamState("A", 0.6, (), INFER)
    with pytest.raises(ConfigError, match="accelerators"):
        ContinualProblem((stream,), 0.0, 120.0)
    with pytest.raises(ConfigError, match="delta"):
        ContinualProblem((stream,), 1.0, 120.0, delta=2.0)
    with pytest.raises(ConfigError, match="streams"):
        ContinualProblem((stream, stream), 1.0, 120.0)
    with pytest.raises(ConfigError, match="cost_s"):
        RetrainOption("c", 0.5, 0.0)
