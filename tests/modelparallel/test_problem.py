"""The JCT model and Eq. 1–2 against hand computations on a fixed two-node case."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.errors import ConfigError
from edgewise.modelparallel.problem import (
    BackgroundTask,
    EdgeNetwork,
    EdgeNode,
    Job,
    Partition,
    TaskPlacement,
    combined_utilisation,
    iteration_time_s,
    job_completion_time_s,
    load_of,
    overloaded,
    utilisation,
)
from edgewise.modelparallel.rounds import outcome
from edgewise.modelparallel.schedule import Decision, Round


def two_nodes() -> tuple[EdgeNetwork, Job, tuple[BackgroundTask, ...]]:
    net = EdgeNetwork((EdgeNode("a", cpu=0.5, memory_mb=1000), EdgeNode("b", cpu=1.0,
                                                                       memory_mb=1000)),
                      np.array([[0.0, 100.0], [100.0, 0.0]]), host_gflops=20.0)
    job = Job("j", "m", origin=0, input_mb=1.0, n_iterations=50, partitions=(
        Partition("p0", gflop=10.0, cpu=0.3, memory_mb=100.0, out_mb=5.0),
        Partition("p1", gflop=20.0, cpu=0.6, memory_mb=200.0, out_mb=0.0)))
    return net, job, (BackgroundTask(1, cpu=0.5, memory_mb=300.0),)


def test_utilisation_eq1_eq2() -> None:
    net, job, bg = two_nodes()
    u = utilisation(net, load_of(net, [job], [TaskPlacement((0, 1))], bg))
    np.testing.assert_allclose(u, [[0.6, 0.1], [1.1, 0.5]])
    np.testing.assert_allclose(combined_utilisation(u), [0.06, 0.55])
    assert overloaded(u, 0.9).tolist() == [False, True]


def test_jct_matches_hand_computation() -> None:
    net, job, bg = two_nodes()
    load = load_of(net, [job], [TaskPlacement((0, 1))], bg)
    # p0 on a: 10 / (20·0.5) = 1 s; activation and gradient 2·5 MB·8 / 100 Mbps = 0.8 s;
    # p1 on b (u_cpu 1.1 > α): 20 / (20·1.0) · 1.1/0.9 s. The batch starts on its origin.
    hand = 1.0 + 0.8 + 1.0 * 1.1 / 0.9
    assert iteration_time_s(job, TaskPlacement((0, 1)), net, load, 0.9) == pytest.approx(hand)
    assert job_completion_time_s(job, TaskPlacement((0, 1)), net, load, 0.9) == pytest.approx(
        50 * hand)
    # Both on b: the batch crosses (1 MB·8/100), no activation transfer, b at 1.4 host.
    load_b = load_of(net, [job], [TaskPlacement((1, 1))], bg)
    hand_b = 0.08 + (10.0 + 20.0) / 20.0 * 1.4 / 0.9
    assert iteration_time_s(job, TaskPlacement((1, 1)), net, load_b, 0.9) == pytest.approx(hand_b)


def test_environment_round_reports_the_hand_jct() -> None:
    net, job, bg = two_nodes()
    rnd = Round(net, (job,), bg, alpha=0.9)
    res = outcome(rnd, Decision((TaskPlacement((0, 1)),), (0,), ((),), 0, 0.0))
    assert res.jct_s == pytest.approx((50 * (1.8 + 1.1 / 0.9),))
    assert res.corrected == 0
    assert res.tasks == (1, 2)


def test_bad_inputs_name_their_field() -> None:
    with pytest.raises(ConfigError, match="cpu"):
        EdgeNode("x", cpu=0.0, memory_mb=10)
    net, job, _ = two_nodes()
    with pytest.raises(ConfigError, match="placement"):
        load_of(net, [job], [TaskPlacement((0,))])
    with pytest.raises(ConfigError, match="bandwidth"):
        EdgeNetwork(net.nodes, np.zeros((2, 2)))
