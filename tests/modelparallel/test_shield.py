"""Algorithm 1 (centralized) and §IV-D (decentralized) shields over CPU, memory and bandwidth:
safety and validity as properties, minimal interference and repair on fixed cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.modelparallel.jct import load_of, overloaded, utilisation
from edgewise.modelparallel.problem import EdgeNetwork, EdgeNode, Job, Partition, TaskPlacement
from edgewise.modelparallel.shields import SHIELDS
from edgewise.modelparallel.shields.algorithm1 import demand_weight, move_delta
from edgewise.modelparallel.shields.centralized import centralized_shield
from edgewise.modelparallel.shields.decentralized import decentralized_shield, sub_clusters

ALPHA = 0.9


def net_of(cpus: list[float], xs: list[float] | None = None, range_m: float = 1e9,
           mem: float | list[float] = 1e6, bw: float | list[float] = 1e6) -> EdgeNetwork:
    n = len(cpus)
    xs = xs or [float(i) for i in range(n)]
    mems = mem if isinstance(mem, list) else [mem] * n
    bws = bw if isinstance(bw, list) else [bw] * n
    return EdgeNetwork(tuple(EdgeNode(f"n{i}", cpu=c, memory_mb=m, bandwidth_mbps=b, x_m=x,
                                      range_m=range_m)
                             for i, (c, x, m, b) in enumerate(zip(cpus, xs, mems, bws,
                                                                  strict=True))))


def job(origin: int, *cpus: float, memory_mb: float = 1.0, out_mbps: float = 0.0) -> Job:
    return Job(f"j{origin}", "m", origin, tuple(
        Partition(f"p{i}", 1.0, c, memory_mb, 0.0, out_mbps) for i, c in enumerate(cpus)))


Case = tuple[EdgeNetwork, list[Job], list[TaskPlacement], np.ndarray]


@st.composite
def cases(draw: st.DrawFn, memory: bool = True) -> Case:
    n = draw(st.integers(2, 6))
    cpus = draw(st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n))
    xs = draw(st.lists(st.floats(0.0, 100.0), min_size=n, max_size=n))
    mems = draw(st.lists(st.sampled_from([768.0, 1024.0, 2048.0] if memory else [1e7]),
                         min_size=n, max_size=n))
    bws = draw(st.lists(st.sampled_from([50.0, 100.0, 1000.0]), min_size=n, max_size=n))
    net = EdgeNetwork(tuple(
        EdgeNode(f"n{i}", cpu=c, memory_mb=m, bandwidth_mbps=b, x_m=x,
                 range_m=draw(st.floats(10.0, 150.0)))
        for i, (c, x, m, b) in enumerate(zip(cpus, xs, mems, bws, strict=True))))
    origins = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    jobs, places = [], []
    for o in origins:
        k = draw(st.integers(1, 4))
        parts = tuple(Partition(f"p{i}", 1.0, draw(st.floats(0.01, 0.5)),
                                draw(st.floats(1.0, 500.0)), 1.0, draw(st.floats(0.0, 40.0)))
                      for i in range(k))
        jobs.append(Job(f"j{o}", "m", o, parts, input_mbps=draw(st.floats(0.0, 10.0))))
        cands = net.candidates(o)
        places.append(TaskPlacement(tuple(draw(st.sampled_from(cands)) for _ in range(k))))
    base = np.array([[draw(st.floats(0.0, 0.5)) * c, draw(st.floats(0.0, 0.5)) * m,
                      draw(st.floats(0.0, 0.3)) * b] for c, m, b in zip(cpus, mems, bws,
                                                                         strict=True)])
    return net, jobs, places, base


def _load(net: EdgeNetwork, jobs: list[Job], places: Sequence[TaskPlacement],
          base: np.ndarray, deferred: Sequence[int] = ()) -> np.ndarray:
    kept = [j for j in range(len(jobs)) if j not in deferred]
    return np.asarray(base + load_of(net, [jobs[j] for j in kept], [places[j] for j in kept]))


def _over(net: EdgeNetwork, jobs: list[Job], places: Sequence[TaskPlacement],
          base: np.ndarray) -> np.ndarray:
    return overloaded(utilisation(net, _load(net, jobs, places, base)), ALPHA)


@settings(max_examples=120, deadline=None)
@given(cases())
def test_both_shields_leave_a_valid_schedule_within_the_cluster(case: Case) -> None:
    net, jobs, places, base = case
    for name in SHIELDS.names():
        res = SHIELDS.get(name)(net, jobs, places, base, ALPHA)
        after = _load(net, jobs, res.placements, base, res.deferred)
        assert np.all(after[:, 1] <= net.capacity()[:, 1] + 1e-6), name  # §IV-B: valid
        moved = {(j, i) for j, (a, b) in enumerate(zip(places, res.placements, strict=True))
                 for i, (x, y) in enumerate(zip(a.nodes, b.nodes, strict=True)) if x != y}
        assert moved <= set(res.changed), name
        if not _over(net, jobs, places, base).any():
            assert res.placements == tuple(places) and res.changed == () == res.deferred


@settings(max_examples=120, deadline=None)
@given(cases(memory=False))
def test_centralized_shield_leaves_no_node_above_alpha_when_a_safe_move_exists(
        case: Case) -> None:
    """Memory ample (no repair needed): Algorithm 1 never overloads a node that was fine,
    moves layers only to neighbours of their proposed host (§IV-C), and stops only where no
    neighbour could take an overloaded node's layer without going above α."""
    net, jobs, places, base = case
    res = centralized_shield(net, jobs, places, base, ALPHA)
    before, after = _over(net, jobs, places, base), _over(net, jobs, res.placements, base)
    assert not np.any(after & ~before) and res.deferred == ()
    load, cap = _load(net, jobs, res.placements, base), net.capacity()
    for j, (jb, p, q) in enumerate(zip(jobs, res.placements, places, strict=True)):
        for a, b in zip(q.nodes, p.nodes, strict=True):
            assert b == a or b in net.neighbours(a)
        for i, h in enumerate(p.nodes):
            if not after[h]:
                continue
            for k in net.neighbours(h):
                delta = move_delta(jb, p.nodes, i, k, net.n)
                rising = np.any(delta > 1e-9, axis=1)
                rising[h] = False
                fits = np.all(load[rising] + delta[rising] <= ALPHA * cap[rising] + 1e-9)
                excess_falls = (np.maximum(0, (load[h] + delta[h]) / cap[h] - ALPHA).sum()
                                < np.maximum(0, load[h] / cap[h] - ALPHA).sum() - 1e-9)
                assert not (fits and excess_falls), (j, i, k)


def test_collision_of_two_agents_moves_one_layer_to_the_least_utilised_node() -> None:
    net = net_of([1.0, 1.0, 1.0, 1.0])
    base = np.array([[0.0, 0, 0], [0.0, 0, 0], [0.0, 0, 0], [0.3, 0, 0]])
    jobs = [job(0, 0.5, out_mbps=1.0), job(1, 0.45, out_mbps=1.0)]
    res = centralized_shield(net, jobs, [TaskPlacement((2,)), TaskPlacement((2,))], base, ALPHA)
    # ω ranks job 0's layer first; node 0 and 1 tie at utilisation 0, node 0 wins the tie.
    assert res.changed == ((0, 0),)
    assert res.placements == (TaskPlacement((0,)), TaskPlacement((2,)))


def test_heaviest_layer_moves_first_so_one_change_suffices() -> None:
    net = net_of([1.0, 1.0, 0.5])
    jobs = [job(0, 0.2, 0.6, out_mbps=1.0), job(1, 0.25, out_mbps=1.0)]
    proposed = [TaskPlacement((1, 1)), TaskPlacement((1,))]
    res = centralized_shield(net, jobs, proposed, np.zeros((3, 3)), ALPHA)
    assert res.changed == ((0, 1),)  # 0.6 leaves node 1 (now 0.45 ≤ 0.9); nothing else moves
    assert res.placements[1] == TaskPlacement((1,)) and res.placements[0].nodes[0] == 1


def test_a_shared_link_above_alpha_is_relieved_by_removing_the_transfer() -> None:
    """Two agents' transfers meet on node 1's 50 Mbps link (40 + 40 Mbps): moving one job's
    second layer next to its first removes that transfer from the link (bandwidth is in the
    shield's check, §III)."""
    net = net_of([1.0, 1.0, 1.0], bw=[1000.0, 50.0, 1000.0])
    jobs = [job(0, 0.1, 0.1, out_mbps=40.0), job(2, 0.1, 0.1, out_mbps=40.0)]
    proposed = [TaskPlacement((0, 1)), TaskPlacement((2, 1))]
    assert _over(net, jobs, proposed, np.zeros((3, 3))).tolist() == [False, True, False]
    res = centralized_shield(net, jobs, proposed, np.zeros((3, 3)), ALPHA)
    assert len(res.changed) == 1
    assert not _over(net, jobs, res.placements, np.zeros((3, 3))).any()
    (j, i), = res.changed
    assert res.placements[j].nodes[i] == jobs[j].origin  # the transfer stays on one node


def test_memory_above_capacity_is_repaired_even_without_a_safe_host() -> None:
    """Two 600 MB layers on node 1 (1000 MB) make the schedule invalid. No neighbour stays
    below α with either (node 0 lacks memory, node 2 lacks CPU), so Algorithm 1 alone would
    leave it; the repair moves one where the memory fits."""
    net = net_of([1.0, 1.0, 1.0], mem=[500.0, 1000.0, 4000.0])
    base = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.85, 0.0, 0.0]])
    jobs = [job(0, 0.1, memory_mb=600.0), job(2, 0.1, memory_mb=600.0)]
    res = centralized_shield(net, jobs, [TaskPlacement((1,)), TaskPlacement((1,))], base,
                             ALPHA)
    after = _load(net, jobs, res.placements, base)
    assert np.all(after[:, 1] <= net.capacity()[:, 1]) and res.deferred == ()
    assert len(res.changed) == 1 and sorted(p.nodes[0] for p in res.placements) == [1, 2]


def test_a_job_that_fits_nowhere_is_deferred() -> None:
    net = net_of([1.0, 1.0], mem=[500.0, 500.0])
    jobs = [job(0, 0.1, memory_mb=400.0), job(1, 0.1, memory_mb=400.0)]
    res = decentralized_shield(net, jobs, [TaskPlacement((0,)), TaskPlacement((0,))],
                               np.zeros((2, 3)), ALPHA)
    assert len(res.deferred) == 0 or len(res.deferred) == 1
    assert np.all(_load(net, jobs, res.placements, np.zeros((2, 3)), res.deferred)[:, 1]
                  <= 500.0)
    res = centralized_shield(net, [job(0, 0.1, memory_mb=600.0)], [TaskPlacement((0,))],
                             np.zeros((2, 3)), ALPHA)
    assert res.deferred == (0,)


def test_no_safe_host_leaves_the_action_alone() -> None:
    net = net_of([0.5, 0.5])
    base = np.array([[0.4, 0.0, 0.0], [0.4, 0.0, 0.0]])
    res = centralized_shield(net, [job(0, 0.3)], [TaskPlacement((1,))], base, ALPHA)
    assert res.changed == () and res.placements == (TaskPlacement((1,)),)


def test_decentralized_delegate_catches_a_boundary_collision() -> None:
    net = net_of([1.0, 1.0, 1.0, 1.0], xs=[0.0, 1.0, 10.0, 11.0])
    assert sub_clusters(net, 0) == [(0, 1), (2, 3)]
    # Agents 1 and 2 sit in different sub-clusters; both pick node 1: each sub-shield alone
    # sees no overload, the delegate sees the boundary node 1 at 1.0 and moves one layer.
    jobs = [job(1, 0.5), job(2, 0.5)]
    both_on_1 = [TaskPlacement((1,)), TaskPlacement((1,))]
    res = decentralized_shield(net, jobs, both_on_1, np.zeros((4, 3)), ALPHA)
    assert len(res.changed) == 1
    assert not _over(net, jobs, res.placements, np.zeros((4, 3))).any()
    cen = centralized_shield(net, jobs, both_on_1, np.zeros((4, 3)), ALPHA)
    assert len(cen.changed) == 1


def test_demand_weight_is_eq3_over_three_resources() -> None:
    assert demand_weight(np.array([0.2, 100.0, 10.0]), np.array([0.5, 1000.0, 100.0])) == (
        0.2 / 0.5 * 0.1 * 0.1)
    assert job(0, 0.2, 0.3, memory_mb=5.0, out_mbps=4.0).demand().tolist() == [
        [0.2, 5.0, 0.0 + 4.0], [0.3, 5.0, 4.0 + 4.0]]  # its input and its output transfer


def test_shield_timing_measures_both_shields_on_the_same_actions() -> None:
    from edgewise.modelparallel.network import random_network
    from edgewise.modelparallel.rounds import random_round
    from edgewise.modelparallel.shield_timing import random_proposals, shield_seconds

    net = random_network(10, np.random.default_rng(0))
    rnd = random_round(net, "vgg-16", 100.0, np.random.default_rng(1))
    proposed = random_proposals(rnd, np.random.default_rng(2))
    for jb, placement in zip(rnd.jobs, proposed, strict=True):
        assert set(placement.nodes) <= set(net.candidates(jb.origin))
    timed = shield_seconds(("vgg-16",), 10, 2, seed=0, repeats=3)
    assert set(timed) == {"srole-c", "srole-d"} and all(v > 0 for v in timed.values())
