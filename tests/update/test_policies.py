"""Deep-Edge's Algorithm 1 against the exact oracle, the fair baseline, and the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.errors import InfeasibleError
from edgewise.update.policies import get_policy
from edgewise.update.problem import AppLimit, UpdateProblem, WorkerState
from edgewise.update.sim import score
from tests.update.stub import StubModel

MODELS = {"fast": StubModel("fast", speed=1.5, mem_per_sample=0.3, sift_ms=70),
          "slow": StubModel("slow", speed=1.0, mem_per_sample=0.6, sift_ms=95)}
RNG = np.random.default_rng(0)

state = st.tuples(st.floats(0, 70), st.floats(0, 70), st.floats(5, 50))


def _problem(states: list[tuple[float, float, float]], types: list[str],
             deadline_ms: float = 200.0, n: int = 3855) -> UpdateProblem:
    workers = tuple(
        WorkerState(f"w{i}", t, s, (AppLimit(f"sift-{i}", "sift", deadline_ms),))
        for i, (s, t) in enumerate(zip(states, types, strict=True)))
    return UpdateProblem(workers, (20.0, 0.0, 30.0), n, MODELS, b_min=8, b_max=128)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1, max_size=4))
def test_deep_edge_is_feasible_and_close_to_exact(workers: list) -> None:
    problem = _problem([s for s, _ in workers], [t for _, t in workers])
    try:
        best = get_policy("exact")(problem, RNG)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            get_policy("deep-edge")(problem, RNG)
        return
    plan = get_policy("deep-edge")(problem, RNG)
    assert sum(plan.shards.values()) == problem.n_samples
    assert all(8 <= plan.batch_sizes[w] <= 128 for w in plan.workers)
    assert not score(problem, plan).violations
    assert plan.predicted_epoch_s >= best.predicted_epoch_s * (1 - 1e-9)
    assert plan.predicted_epoch_s <= best.predicted_epoch_s * 1.25


@settings(max_examples=30, deadline=None)
@given(state, st.integers(2, 5))
def test_a_faster_device_never_gets_a_smaller_shard(s: tuple, n: int) -> None:
    problem = _problem([s] * n, ["fast"] + ["slow"] * (n - 1), deadline_ms=1e9)
    plan = get_policy("deep-edge")(problem, RNG)
    slow = [plan.shards.get(f"w{i}", 0) for i in range(1, n)]
    assert plan.shards.get("w0", 0) >= max(slow)


def test_a_heavily_loaded_device_is_dropped_and_deadlines_hold() -> None:
    problem = _problem([(10, 10, 20), (10, 10, 20), (85, 60, 20)], ["slow"] * 3)
    plan = get_policy("deep-edge")(problem, RNG)
    assert "w2" not in plan.workers
    assert not score(problem, plan).violations
    fair = get_policy("fair")(problem, RNG)
    assert "w2" in fair.workers and score(problem, fair).violations == ("sift-2",)


def test_infeasible_constraints_raise_a_clear_error() -> None:
    problem = _problem([(90, 90, 20)], ["slow"], deadline_ms=150)
    with pytest.raises(InfeasibleError, match="deadline"):
        get_policy("deep-edge")(problem, RNG)
    with pytest.raises(InfeasibleError, match="deadline"):
        get_policy("exact")(problem, RNG)


def test_fair_splits_equally() -> None:
    problem = _problem([(0, 0, 10)] * 3, ["slow", "fast", "slow"], n=100)
    plan = get_policy("fair")(problem, RNG)
    assert sorted(plan.shards.values()) == [33, 33, 34]
