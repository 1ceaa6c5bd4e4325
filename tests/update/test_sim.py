"""`update.sim`: simulate plans with a policy (name or callable) and scores the plan; `score`
scores a given plan under any models."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.update.policies import REGISTRY
from edgewise.update.problem import UpdatePlan, UpdateProblem
from edgewise.update.sim import score, simulate
from tests.update.stub import StubModel
from tests.update.test_policies import MODELS, _problem


def test_simulate_is_deterministic_and_keeps_timings_apart() -> None:
    problem = _problem([(10, 10, 20), (40, 30, 20), (70, 60, 20)], ["fast", "slow", "slow"])
    a, b = simulate(problem, "deep-edge", seed=3), simulate(problem, "deep-edge", seed=3)
    assert a == b  # timings do not take part in equality
    assert a.timings["decision_seconds"] >= 0.0
    assert a.score == score(problem, a.plan)
    assert not a.score.violations


def test_each_workers_epoch_is_its_steps_of_its_two_parts() -> None:
    """epochTime_i = ⌈d_i / b_i⌉ (b_i t^compute + t^update), from the parts the score gives."""
    problem = _problem([(10, 10, 20), (40, 30, 20), (70, 60, 20)], ["fast", "slow", "slow"])
    for policy in ("deep-edge", "fair"):
        outcome = simulate(problem, policy)
        plan, result = outcome.plan, outcome.score
        assert set(result.worker_parts) == {w for w, d in plan.shards.items() if d > 0}
        for w, (t_c, t_u) in result.worker_parts.items():
            b = plan.batch_sizes[w]
            assert t_c > 0 and t_u > 0
            assert result.worker_epoch_s[w] == pytest.approx(
                math.ceil(plan.shards[w] / b) * (b * t_c + t_u))


def test_a_callable_policy_and_its_name_give_the_same_outcome() -> None:
    problem = _problem([(10, 10, 20), (20, 10, 30)], ["fast", "slow"])
    seen: list[np.random.Generator] = []

    def fair(p: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
        seen.append(rng)
        return REGISTRY.get("fair")(p, rng)

    assert simulate(problem, fair, seed=1) == simulate(problem, "fair", seed=1)
    assert isinstance(seen[0], np.random.Generator)
    with pytest.raises(ConfigError, match="unknown policy"):
        simulate(problem, "nope")


def test_truth_scores_the_plan_made_with_the_problems_models() -> None:
    """A plan made with optimistic models, scored by slower ones: same plan, longer epoch,
    and the slower truth's SIFT may miss where the planning models said it would not."""
    problem = _problem([(30, 30, 20), (30, 30, 20)], ["slow", "slow"])
    slower = {t: StubModel(t, speed=m.speed / 2, mem_per_sample=m.mem_per_sample,
                           sift_ms=m.sift_ms * 2) for t, m in MODELS.items()}
    planned = simulate(problem, "deep-edge")
    truth = simulate(problem, "deep-edge", truth=slower)
    assert truth.plan == planned.plan
    assert truth.score.epoch_s > planned.score.epoch_s
    assert set(truth.score.exec_ms) == set(planned.score.exec_ms)
    assert all(truth.score.exec_ms[a] > planned.score.exec_ms[a] for a in truth.score.exec_ms)


def test_an_infeasible_problem_raises_from_the_policy() -> None:
    with pytest.raises(InfeasibleError):
        simulate(_problem([(90, 90, 20)], ["slow"], deadline_ms=150), "deep-edge")
