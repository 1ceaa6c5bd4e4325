"""Deep-Edge's Algorithm 1 against the exact oracle, the fair baseline, and the simulator."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.errors import InfeasibleError
from edgewise.update.policies import get_policy
from edgewise.update.problem import AppLimit, UpdatePlan, UpdateProblem, WorkerState
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


def plans_or_both_infeasible(problem: UpdateProblem, reference: str,
                             policy: str) -> tuple[UpdatePlan, UpdatePlan] | None:
    """The reference policy's plan and ``policy``'s (checked valid), or None where the
    reference finds the problem infeasible, after checking that ``policy`` does too."""
    try:
        base = get_policy(reference)(problem, RNG)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            get_policy(policy)(problem, RNG)
        return None
    plan = get_policy(policy)(problem, RNG)
    assert_valid_plan(problem, plan)
    return base, plan


def assert_valid_plan(problem: UpdateProblem, plan: UpdatePlan) -> None:
    """Every sample in one shard, batches within [8, 128], no app deadline or memory limit
    predicted to be broken."""
    assert sum(plan.shards.values()) == problem.n_samples
    assert all(8 <= plan.batch_sizes[w] <= 128 for w in plan.workers)
    assert not score(problem, plan).violations


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1, max_size=4))
def test_deep_edge_is_feasible_and_close_to_exact(workers: list) -> None:
    problem = _problem([s for s, _ in workers], [t for _, t in workers])
    both = plans_or_both_infeasible(problem, "exact", "deep-edge")
    if both is None:
        return
    best, plan = both
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


def _brute_force_epoch(problem: UpdateProblem) -> float:
    """The exact oracle's objective, computed from the models alone: every worker subset ×
    every power-of-two batch within memory and δ, continuous shards d_i ∝ 1/t_i^total."""
    best = np.inf
    sizes = [b for b in (8, 16, 32, 64, 128) if problem.b_min <= b <= problem.b_max]
    for subset in itertools.chain.from_iterable(
            itertools.combinations(problem.workers, k) for k in range(1, len(problem.workers) + 1)):
        for batches in itertools.product(sizes, repeat=len(subset)):
            rates = []
            for w, b in zip(subset, batches, strict=True):
                model, state, one = MODELS[w.device_type], np.array([w.state]), np.array([b])
                new = model.new_state(state, one.astype(float))
                if new[0, 2] > problem.mem_limit_percent or any(
                        model.exec_time(a.kind, new)[0] > a.threshold_ms for a in w.apps):
                    break
                update = model.update_time(state, one, np.array([np.mean(batches)]),
                                           np.array([problem.ps_state[0]]),
                                           np.array([float(len(subset))]))[0]
                rates.append(1.0 / (model.compute_time(state, one.astype(float))[0] + update / b))
            else:
                best = min(best, problem.n_samples / sum(rates))
    return best


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1, max_size=3))
def test_exact_is_the_brute_force_minimum(workers: list) -> None:
    problem = _problem([s for s, _ in workers], [t for _, t in workers])
    oracle = _brute_force_epoch(problem)
    if np.isinf(oracle):
        with pytest.raises(InfeasibleError):
            get_policy("exact")(problem, RNG)
        return
    assert get_policy("exact")(problem, RNG).predicted_epoch_s == pytest.approx(oracle, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1, max_size=4))
def test_literal_algorithm_1_keeps_deadlines_and_never_beats_exact(workers: list) -> None:
    problem = _problem([s for s, _ in workers], [t for _, t in workers])
    try:
        plan = get_policy("deep-edge-literal")(problem, RNG)
    except InfeasibleError:
        return  # literal Algorithm 1 may drop every worker that deep-edge would shrink
    assert sum(plan.shards.values()) == problem.n_samples
    assert not score(problem, plan).violations
    best = get_policy("exact")(problem, RNG)
    assert plan.predicted_epoch_s >= best.predicted_epoch_s * (1 - 1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(state, st.sampled_from(["fast", "slow"])), min_size=1, max_size=5),
       st.sampled_from([8, 16, 32, 64]))
def test_fair_gives_equal_shares_at_the_users_batch_to_every_worker_it_fits(
        workers: list, batch: int) -> None:
    problem = replace(_problem([s for s, _ in workers], [t for _, t in workers], n=1000),
                      user_batch=batch)
    fits = [w.device for w in problem.workers
            if MODELS[w.device_type].new_state(np.array([w.state]), np.array([float(batch)]))[0, 2]
            <= problem.mem_limit_percent]
    if not fits:
        with pytest.raises(InfeasibleError, match="memory"):
            get_policy("fair")(problem, RNG)
        return
    plan = get_policy("fair")(problem, RNG)
    assert sorted(plan.workers) == sorted(fits)
    assert set(plan.batch_sizes.values()) == {batch}
    assert max(plan.shards.values()) - min(plan.shards.values()) <= 1
    assert sum(plan.shards.values()) == 1000
