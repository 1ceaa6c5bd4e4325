"""The execution model against hand computations on a fixed two-node case: Eq. 1–2 over CPU,
memory and bandwidth, the overload models, shared links, validity (§IV-B)."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.errors import ConfigError
from edgewise.modelparallel.jct import (
    combined_utilisation,
    invalid_reason,
    iteration_time_s,
    job_completion_time_s,
    load_of,
    occupancy,
    overloaded,
    pair_rates_mbps,
    stretches,
    transfer_s,
    utilisation,
)
from edgewise.modelparallel.problem import (
    BackgroundTask,
    EdgeNetwork,
    EdgeNode,
    Job,
    Partition,
    TaskPlacement,
)

ALPHA = 0.9


def two_nodes() -> tuple[EdgeNetwork, Job, tuple[BackgroundTask, ...]]:
    net = EdgeNetwork((EdgeNode("a", cpu=0.5, memory_mb=1000, bandwidth_mbps=100),
                       EdgeNode("b", cpu=1.0, memory_mb=1000, bandwidth_mbps=200)),
                      host_gflops=20.0)
    job = Job("j", "m", origin=0, input_mb=1.0, n_iterations=50, input_mbps=8.0, partitions=(
        Partition("p0", gflop=10.0, cpu=0.3, memory_mb=100.0, out_mb=5.0, out_mbps=40.0),
        Partition("p1", gflop=20.0, cpu=0.6, memory_mb=200.0, out_mb=0.0)))
    return net, job, (BackgroundTask(1, cpu=0.5, memory_mb=300.0, bandwidth_mbps=150.0),)


def test_utilisation_eq1_eq2_over_three_resources() -> None:
    net, job, bg = two_nodes()
    u = utilisation(net, load_of(net, [job], [TaskPlacement((0, 1))], bg))
    # the p0 -> p1 transfer loads both links with 40 Mbps; the batch starts on its origin
    np.testing.assert_allclose(u, [[0.6, 0.1, 0.4], [1.1, 0.5, 0.95]])
    np.testing.assert_allclose(combined_utilisation(u), [0.6 * 0.1 * 0.4, 1.1 * 0.5 * 0.95])
    assert overloaded(u, ALPHA).tolist() == [False, True]
    # on one node nothing crosses a link but the batch from the origin
    u1 = utilisation(net, load_of(net, [job], [TaskPlacement((1, 1))], bg))
    np.testing.assert_allclose(u1[:, 2], [8.0 / 100, (150.0 + 8.0) / 200])


def test_jct_under_processor_sharing_matches_hand_computation() -> None:
    net, job, bg = two_nodes()
    place = TaskPlacement((0, 1))
    occ = occupancy(net, [job], [place], bg)
    # p0 on a, alone there: 10 / (20·0.5) = 1 s. Activation and gradient, 2·5 MB·8 /
    # min(100, 200) Mbps = 0.8 s alone; b's link carries the background's 150 of 200 Mbps:
    # the residual 50 would be 4× slower, an equal share with it 2×: 2× (max-min fair).
    # p1 on b: 20 / (20·1.0) s beside the background's 0.5 CPU: min(1 / 0.5, 2) = 2×.
    hand = 1.0 + 0.8 * 2 + 1.0 * 2
    assert iteration_time_s(job, place, net, occ, ALPHA) == pytest.approx(hand)
    assert job_completion_time_s(job, place, net, occ, ALPHA) == pytest.approx(50 * hand)


def test_quadratic_model_slows_from_alpha_and_invalid_model_refuses() -> None:
    net, job, bg = two_nodes()
    place = TaskPlacement((0, 1))
    occ = occupancy(net, [job], [place], bg)
    hand = 1.0 + 0.8 * (0.95 / 0.9) ** 2 + (1.1 / 0.9) ** 2  # total u: b's CPU 1.1, link 0.95
    assert iteration_time_s(job, place, net, occ, ALPHA, "quadratic") == pytest.approx(hand)
    assert iteration_time_s(job, place, net, occ, ALPHA, "invalid") == pytest.approx(2.8)
    assert invalid_reason(job, place, net, occ.load, "invalid") == "cpu"
    assert invalid_reason(job, place, net, occ.load, "processor-sharing") is None
    with pytest.raises(ConfigError, match="overload"):
        iteration_time_s(job, place, net, occ, ALPHA, "magic")


def test_transfers_sharing_a_link_share_it_max_min_fairly() -> None:
    net, job, _ = two_nodes()
    place = TaskPlacement((0, 1))
    lone = transfer_s(net, 0, 1, 5.0)
    assert lone == pytest.approx(5.0 * 8 / 100)

    def beside(mbps: float) -> float:
        other = BackgroundTask(0, cpu=0.0, memory_mb=0.0, bandwidth_mbps=mbps)
        occ = occupancy(net, [job], [place], (other,))
        return transfer_s(net, 0, 1, 5.0, stretches(job, place, net, occ, ALPHA))

    assert beside(30.0) == pytest.approx(lone / (1 - 0.3))  # the 70 Mbps it leaves
    assert beside(80.0) == pytest.approx(2 * lone)  # an equal share of the link
    crowded = occupancy(net, [job], [place], (BackgroundTask(0, 0.0, 0.0, 80.0),))
    rates = pair_rates_mbps(job, place, net, crowded, ALPHA)
    assert rates[0, 1] == rates[1, 0] == pytest.approx(50.0) and np.isinf(rates[0, 0])


def test_a_job_alone_is_not_slowed_by_its_own_demand() -> None:
    """A job's own transfers run one after the other (no pipelining): above the link's
    capacity at its data rate it is transfer-bound, not contended."""
    net, _, _ = two_nodes()
    greedy = Job("g", "m", 0, (Partition("p0", 10.0, 0.3, 100.0, 5.0, out_mbps=400.0),
                               Partition("p1", 20.0, 0.6, 200.0, 0.0)))
    place = TaskPlacement((0, 1))
    occ = occupancy(net, [greedy], [place])
    assert utilisation(net, occ.load)[0, 2] == pytest.approx(4.0)
    assert iteration_time_s(greedy, place, net, occ, ALPHA) == pytest.approx(1.0 + 0.8 + 1.0)


def test_memory_above_capacity_is_invalid_in_every_model() -> None:
    net, job, bg = two_nodes()
    heavy = (*bg, BackgroundTask(1, cpu=0.0, memory_mb=600.0))
    load = load_of(net, [job], [TaskPlacement((0, 1))], heavy)  # b: 300 + 600 + 200 MB
    for model in ("processor-sharing", "quadratic", "invalid"):
        assert invalid_reason(job, TaskPlacement((0, 1)), net, load, model) == "memory"
    assert invalid_reason(job, TaskPlacement((0, 0)), net, load_of(
        net, [job], [TaskPlacement((0, 0))], heavy)) is None  # b holds none of its layers


def test_bad_inputs_name_their_field() -> None:
    with pytest.raises(ConfigError, match="cpu"):
        EdgeNode("x", cpu=0.0, memory_mb=10)
    with pytest.raises(ConfigError, match="bandwidth_mbps"):
        EdgeNode("x", cpu=1.0, memory_mb=10, bandwidth_mbps=0.0)
    net, job, _ = two_nodes()
    with pytest.raises(ConfigError, match="placement"):
        load_of(net, [job], [TaskPlacement((0,))])
