"""The accuracy monitor's convergence fit recovers known curves and estimates epochs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.perf.convergence import ConvergenceFit, epochs_to_target, fit_accuracy_curve


@settings(max_examples=40, deadline=None)
@given(st.floats(0.2, 3.0), st.floats(1.1, 5.0), st.floats(0.8, 0.99))
def test_fit_recovers_a_noiseless_curve(rate: float, offset: float, plateau: float) -> None:
    truth = ConvergenceFit(rate, offset, plateau)
    observed = [truth.accuracy(k) for k in range(1, 9)]
    fit = fit_accuracy_curve(observed)
    assert fit is not None
    for k in range(1, 20):
        assert fit.accuracy(k) == pytest.approx(truth.accuracy(k), abs=2e-3)


def test_epochs_to_target_extrapolates_then_counts() -> None:
    truth = ConvergenceFit(0.5, 1.5, 0.97)
    seen = [truth.accuracy(k) for k in range(1, 5)]
    target = truth.accuracy(12)
    assert epochs_to_target(seen, target - 1e-9) in (12, 13)
    assert epochs_to_target([0.5, 0.8, 0.95], 0.9) == 3


def test_unreachable_or_underdetermined_targets_give_none() -> None:
    plateau = ConvergenceFit(1.0, 2.0, 0.8)
    assert epochs_to_target([plateau.accuracy(k) for k in range(1, 6)], 0.95) is None
    assert epochs_to_target([0.3, 0.4], 0.95) is None
