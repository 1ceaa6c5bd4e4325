"""The goodput policy (``deep-edge-goodput``): Algorithm 1 under each batch cap, judged by
``epoch time × (1 + B / noise_scale)``. Against ``deep-edge`` (its uncapped candidate) on
small random instances, the direction of its choice as the noise scale shrinks, and its
errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.update.policies import get_policy
from edgewise.update.policies.goodput import batch_caps, epochs_factor, time_to_target_s
from edgewise.update.problem import UpdatePlan
from tests.update.test_policies import _problem, plans_or_both_infeasible

RNG = np.random.default_rng(0)
state = st.tuples(st.floats(0, 70), st.floats(0, 70), st.floats(5, 50))
workers_st = st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1,
                      max_size=4)


def _step_s(plan: UpdatePlan, n_samples: int) -> float:
    """Predicted seconds per synchronous step: the epoch over its steps, n / B."""
    return plan.predicted_epoch_s * sum(plan.batch_sizes.values()) / n_samples


def test_the_caps_double_from_b_min_and_end_at_b_max() -> None:
    assert batch_caps(8, 128) == [8, 16, 32, 64, 128]
    assert batch_caps(8, 100) == [8, 16, 32, 64, 100]
    assert batch_caps(16, 16) == [16]
    assert epochs_factor(224, 224) == 2.0


@settings(max_examples=40, deadline=None)
@given(workers_st, st.floats(4.0, 1e5))
def test_never_a_longer_predicted_time_to_target_than_deep_edge(workers: list,
                                                                noise: float) -> None:
    problem = replace(_problem([s for s, _ in workers], [t for _, t in workers]),
                      noise_scale=noise)
    both = plans_or_both_infeasible(problem, "deep-edge", "deep-edge-goodput")
    if both is None:  # the apps' deadlines and memory hold in the plan (checked there)
        return
    base, plan = both
    assert time_to_target_s(plan, noise) <= time_to_target_s(base, noise) * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(workers_st, st.floats(4.0, 2000.0), st.floats(1.5, 50.0))
def test_a_smaller_noise_scale_never_chooses_longer_steps(workers: list, noise: float,
                                                         ratio: float) -> None:
    """Exchange argument: with ``T = E (1 + B/φ)``, the plans chosen at ``φ₁ < φ₂`` have
    ``E₁B₁ ≤ E₂B₂``, i.e. seconds per step (``E B / n``) never grow as ``φ`` shrinks."""
    problem = _problem([s for s, _ in workers], [t for _, t in workers])
    try:
        small = get_policy("deep-edge-goodput")(replace(problem, noise_scale=noise), RNG)
    except InfeasibleError:
        return
    large = get_policy("deep-edge-goodput")(replace(problem, noise_scale=noise * ratio), RNG)
    n = problem.n_samples
    assert _step_s(small, n) <= _step_s(large, n) * (1 + 1e-9)


def test_a_small_noise_scale_takes_smaller_batches_than_deep_edge() -> None:
    problem = _problem([(10.0, 0.0, 20.0)] * 4, ["fast", "fast", "slow", "slow"],
                       deadline_ms=1e9)
    base = get_policy("deep-edge")(problem, RNG)
    noisy = get_policy("deep-edge-goodput")(replace(problem, noise_scale=16.0), RNG)
    calm = get_policy("deep-edge-goodput")(replace(problem, noise_scale=1e9), RNG)
    assert sum(noisy.batch_sizes.values()) < sum(base.batch_sizes.values())
    assert noisy.predicted_epoch_s > base.predicted_epoch_s  # slower epochs, fewer of them
    assert calm.predicted_epoch_s <= base.predicted_epoch_s * (1 + 1e-12)
    assert noisy.policy == "deep-edge-goodput"


def test_without_a_noise_scale_it_says_what_it_needs() -> None:
    problem = _problem([(10.0, 0.0, 20.0)] * 2, ["fast", "slow"])
    with pytest.raises(ConfigError, match="gradient noise scale") as raised:
        get_policy("deep-edge-goodput")(problem, RNG)
    assert raised.value.field == "noise_scale"
    for bad in (0.0, -3.0):
        with pytest.raises(ConfigError, match="above 0") as raised:
            replace(problem, noise_scale=bad)
        assert raised.value.field == "noise_scale"
