"""pipeline.sim: a plan's stage times worked by hand, and properties against the policies'
own objective on random instances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.nn.chain import ModelChain
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem, bottleneck_s
from edgewise.pipeline.sim import check_plan, simulate
from tests.pipeline.instances import problems, random_chain, worked


def test_worked_case_by_hand() -> None:
    """``worked``: d→n0→n2→n1, one segment each. Every cut sends 1e6 B after λ: 0.8 s over
    d–n0 (10 Mbit/s), 1.6 s over n0–n2 (5), 0.8 s over n2–n1 (10); the 10 B output goes
    back over n1–d (1 Mbit/s): 10 / 3.024 · 8 / 1e6 s. No GFLOP/s: no compute time."""
    outcome = simulate(worked(), "exact")
    assert outcome.transfer_s == pytest.approx((0.8, 1.6, 0.8), rel=1e-12)
    assert outcome.compute_s == (0.0, 0.0, 0.0)
    back = 10 / 3.024 * 8 / 1e6
    assert outcome.return_s == pytest.approx(back, rel=1e-12)
    assert outcome.bottleneck_s == pytest.approx(1.6, rel=1e-12)
    assert outcome.throughput_rps == pytest.approx(1 / 1.6, rel=1e-12)
    assert outcome.latency_s == pytest.approx(3.2 + back, rel=1e-12)
    assert outcome.memory_bytes == (10, 10, 10)
    assert outcome.policy == "exact" and outcome.timings["decision_seconds"] >= 0


def test_compute_time_and_paper_scoring_by_hand() -> None:
    """Two segments of 2e9 and 1e9 FLOPs on nodes of 1 and 4 GFLOP/s, one partition each
    (memory forces the split): 2 s and 0.25 s of compute. Paper scoring leaves the
    dispatcher out: no input send and no return; the cut's 3.024e6 B (1e6 after λ) over
    the 8 Mbit/s n0–n1 link takes 1 s."""
    chain = ModelChain("c", 10, (3_024_000, 10), (10, 10), (2e9, 1e9))
    bw = np.array([[0, 1, 1], [1, 0, 8], [1, 8, 0]], dtype=float)
    problem = PipelineProblem(chain, ("n0", "n1"), (10, 10), bw, (1.0, 4.0),
                              dispatcher_transfer=False)
    plan = PipelinePlan((0, 1, 2), (0, 1), bottleneck_s(problem, (0, 1, 2), (0, 1), True), "x")
    outcome = simulate(problem, lambda _p, _rng: plan)
    assert outcome.transfer_s == pytest.approx((0.0, 1.0), rel=1e-12)
    assert outcome.compute_s == pytest.approx((2.0, 0.25), rel=1e-12)
    assert outcome.return_s == 0.0
    assert outcome.bottleneck_s == pytest.approx(2.0, rel=1e-12)  # the slow node, not a link
    assert outcome.latency_s == pytest.approx(3.25, rel=1e-12)
    assert outcome.policy == "x"


@settings(max_examples=40, deadline=None)
@given(problems())
def test_simulation_agrees_with_the_policies_objective(problem: PipelineProblem) -> None:
    """The policies score plans with problem.bottleneck_s; the simulator recomputes every
    stage on its own: both must agree, and the pipeline's figures must hang together."""
    for name in ("bottleneck-search", "seifer"):
        try:
            outcome = simulate(problem, name, seed=5)
        except InfeasibleError:
            continue
        plan = outcome.plan
        assert outcome.bottleneck_s == pytest.approx(plan.bottleneck_s, rel=1e-12)
        assert len(outcome.transfer_s) == len(outcome.compute_s) == plan.n_partitions
        assert outcome.bottleneck_s == max(*outcome.transfer_s, *outcome.compute_s)
        assert outcome.latency_s >= outcome.bottleneck_s
        if outcome.bottleneck_s > 0:
            assert outcome.throughput_rps * outcome.bottleneck_s == pytest.approx(1.0)
        assert all(m <= problem.memory_bytes[v]
                   for m, v in zip(outcome.memory_bytes, plan.nodes, strict=True))
        assert sum(outcome.memory_bytes) == sum(problem.chain.memory_bytes)


def test_same_seed_same_outcome_and_a_shared_generator() -> None:
    problem = random_instance(8, random_chain(np.random.default_rng(1), 12),
                              np.random.default_rng(2), memory_mb=(64, 128))
    assert simulate(problem, "random", seed=3) == simulate(problem, "random", seed=3)
    shared = np.random.default_rng(3)
    first = simulate(problem, "random", seed=shared)
    assert first == simulate(problem, "random", seed=3)  # the same first draws
    second = simulate(problem, "random", seed=shared)  # the stream moved on
    assert second.plan == get_policy("random")(problem, _advanced(3, problem))


def _advanced(seed: int, problem: PipelineProblem) -> np.random.Generator:
    rng = np.random.default_rng(seed)
    get_policy("random")(problem, rng)
    return rng


@pytest.mark.parametrize(("cuts", "nodes", "reason"), [
    ((0, 1, 3), (0, 0), "distinct"),
    ((0, 2, 3), (0, 1), "needs"),
    ((0, 1, 2), (0, 1), "rise strictly"),
    ((0, 3), (0, 1), "cuts"),
    ((0, 1, 2, 3), (0, 1, 7), "distinct indices"),
])
def test_a_plan_that_does_not_fit_is_refused(cuts: tuple[int, ...], nodes: tuple[int, ...],
                                             reason: str) -> None:
    problem = worked()
    bad = PipelinePlan(cuts, nodes, 0.0, "bad")
    with pytest.raises(InfeasibleError, match=reason):
        check_plan(problem, bad)
    with pytest.raises(InfeasibleError):
        simulate(problem, lambda _p, _rng: bad)


def test_an_unknown_policy_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="bottleneck-search"):
        simulate(worked(), "bottleneck-dp")
