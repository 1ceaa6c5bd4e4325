"""PipeEdge's dynamic program against the exact oracle, its device types, and the even split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.nn.chain import ModelChain
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.policies._common import objective
from edgewise.pipeline.policies.even import even_cuts
from edgewise.pipeline.policies.pipeedge import device_types, pipeedge
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from tests.pipeline.instances import problems, typed_problems


def _plans(problem: PipelineProblem) -> tuple[PipelinePlan, PipelinePlan] | None:
    try:
        best = get_policy("exact")(problem, np.random.default_rng(0))
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            pipeedge(problem, np.random.default_rng(0))
        return None
    return best, pipeedge(problem, np.random.default_rng(0))


def _check(problem: PipelineProblem, plan: PipelinePlan) -> None:
    assert plan.cuts[0] == 0 and plan.cuts[-1] == problem.chain.n_segments
    assert all(a < b for a, b in zip(plan.cuts, plan.cuts[1:], strict=False))
    assert len(set(plan.nodes)) == len(plan.nodes) == len(plan.cuts) - 1
    for k, v in enumerate(plan.nodes):
        assert sum(problem.chain.memory_bytes[plan.cuts[k]:plan.cuts[k + 1]]) <= \
            problem.memory_bytes[v]
    assert plan.bottleneck_s == objective(problem, plan.cuts, plan.nodes)


@settings(max_examples=40, deadline=None)
@given(problems())
def test_pipeedge_equals_exact_on_distinct_devices(problem: PipelineProblem) -> None:
    found = _plans(problem)
    if found is not None:
        best, plan = found
        _check(problem, plan)
        assert plan.bottleneck_s == pytest.approx(best.bottleneck_s, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(typed_problems())
def test_pipeedge_equals_exact_with_device_types(problem: PipelineProblem) -> None:
    assert sum(len(m) for m in device_types(problem)) == len(problem.nodes)
    found = _plans(problem)
    if found is not None:
        best, plan = found
        _check(problem, plan)
        assert plan.bottleneck_s == pytest.approx(best.bottleneck_s, rel=1e-12)


def _homogeneous(n: int, segs: int, memory: int = 100) -> PipelineProblem:
    chain = ModelChain("h", 1000, (1000,) * segs, (10,) * segs, (1e9,) * segs)
    bw = (np.ones((n + 1, n + 1)) - np.eye(n + 1)) * 1000.0
    return PipelineProblem(chain, tuple(f"d{i}" for i in range(n)), (memory,) * n, bw,
                           (1.0,) * n)


def test_homogeneous_devices_share_the_work_evenly() -> None:
    # 8 segments of 1 s each on 4 identical devices, transfers ≪ 1 s: two segments each
    problem = _homogeneous(4, 8)
    assert device_types(problem) == [[0, 1, 2, 3]]
    plan = pipeedge(problem, np.random.default_rng(0))
    assert plan.cuts == (0, 2, 4, 6, 8) and plan.nodes == (0, 1, 2, 3)
    assert plan.bottleneck_s == pytest.approx(2.0)


def test_memory_forces_more_stages() -> None:
    # each device holds 2 segments (20 B of 25 B), so 16 segments need 8 of the 16 devices
    # at least; compute pushes to one segment per device on all 16
    plan = pipeedge(_homogeneous(16, 16, memory=25), np.random.default_rng(0))
    assert plan.n_partitions == 16 and plan.bottleneck_s == pytest.approx(1.0)


def test_too_many_states_is_a_config_error() -> None:
    problem = _homogeneous(4, 4)
    with pytest.raises(ConfigError, match="max_states"):
        pipeedge(problem, np.random.default_rng(0), max_states=2)


def test_even_cuts_balance_the_work() -> None:
    assert even_cuts(np.array([1.0, 1, 1, 1, 1, 1]), 3) == (0, 2, 4, 6)
    assert even_cuts(np.array([4.0, 1, 1, 1, 1]), 2) == (0, 1, 5)
    assert even_cuts(np.array([1.0, 1, 1]), 3) == (0, 1, 2, 3)


def test_even_split_uses_every_device_in_order() -> None:
    plan = get_policy("even")(_homogeneous(4, 8), np.random.default_rng(0))
    assert plan.cuts == (0, 2, 4, 6, 8) and plan.nodes == (0, 1, 2, 3)


def test_even_split_that_does_not_fit_names_the_device() -> None:
    with pytest.raises(InfeasibleError, match="node 'd0'"):
        get_policy("even")(_homogeneous(2, 8, memory=30), np.random.default_rng(0))
