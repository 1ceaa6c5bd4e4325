"""Algorithm 1 (centralized) and §IV-D (decentralized) shields: safety as a property, minimal
interference on fixed cases."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.modelparallel.problem import (
    EdgeNetwork,
    EdgeNode,
    Job,
    Partition,
    TaskPlacement,
    load_of,
    overloaded,
    utilisation,
)
from edgewise.modelparallel.shields.algorithm1 import demand_weight
from edgewise.modelparallel.shields.centralized import centralized_shield
from edgewise.modelparallel.shields.decentralized import decentralized_shield, sub_clusters

ALPHA = 0.9


def net_of(cpus: list[float], xs: list[float] | None = None, range_m: float = 1e9,
           mem: float = 1e6) -> EdgeNetwork:
    xs = xs or [float(i) for i in range(len(cpus))]
    nodes = tuple(EdgeNode(f"n{i}", cpu=c, memory_mb=mem, x_m=x, range_m=range_m)
                  for i, (c, x) in enumerate(zip(cpus, xs, strict=True)))
    bw = np.full((len(cpus), len(cpus)), 100.0)
    return EdgeNetwork(nodes, bw)


def job(origin: int, *cpus: float) -> Job:
    return Job(f"j{origin}", "m", origin, tuple(Partition(f"p{i}", 1.0, c, 1.0, 0.0)
                                                for i, c in enumerate(cpus)))


Case = tuple[EdgeNetwork, list[Job], list[TaskPlacement], np.ndarray]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(2, 6))
    cpus = draw(st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n))
    xs = draw(st.lists(st.floats(0.0, 100.0), min_size=n, max_size=n))
    mems = draw(st.lists(st.sampled_from([768.0, 1024.0, 2048.0]), min_size=n, max_size=n))
    nodes = tuple(EdgeNode(f"n{i}", cpu=c, memory_mb=m, x_m=x,
                           range_m=draw(st.floats(10.0, 150.0)))
                  for i, (c, x, m) in enumerate(zip(cpus, xs, mems, strict=True)))
    net = EdgeNetwork(nodes, np.full((n, n), 100.0))
    origins = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    jobs, places = [], []
    for o in origins:
        k = draw(st.integers(1, 4))
        parts = tuple(Partition(f"p{i}", 1.0, draw(st.floats(0.01, 0.5)),
                                draw(st.floats(1.0, 500.0)), 0.0) for i in range(k))
        jobs.append(Job(f"j{o}", "m", o, parts))
        cands = net.candidates(o)
        places.append(TaskPlacement(tuple(draw(st.sampled_from(cands)) for _ in range(k))))
    base = np.array([[draw(st.floats(0.0, 0.5)) * c, 0.0] for c in cpus])
    return net, jobs, places, base


def _over(net: EdgeNetwork, jobs: list[Job], places: Sequence[TaskPlacement],
          base: np.ndarray) -> np.ndarray:
    return overloaded(utilisation(net, base + load_of(net, jobs, places)), ALPHA)


def _moved_to_neighbours(net: EdgeNetwork, proposed: TaskPlacement,
                         shielded: TaskPlacement) -> None:
    """§IV-C: a layer stays or moves to a nearby node of its proposed host d_j."""
    for a, b in zip(proposed.nodes, shielded.nodes, strict=True):
        assert b == a or b in net.neighbours(a)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_centralized_shield_leaves_no_node_above_alpha_when_a_safe_move_exists(case: Case) -> None:
    net, jobs, places, base = case
    res = centralized_shield(net, jobs, places, base, ALPHA)
    before, after = _over(net, jobs, places, base), _over(net, jobs, res.placements, base)
    assert not np.any(after & ~before)  # never overloads a node that was fine
    load = base + load_of(net, jobs, res.placements)
    cap = net.capacity()
    for j, (jb, p, q) in enumerate(zip(jobs, res.placements, places, strict=True)):
        _moved_to_neighbours(net, q, p)
        for i, h in enumerate(p.nodes):
            if not after[h]:
                continue
            b = jb.demand()[i]
            assert not any(np.all(load[k] + b <= ALPHA * cap[k] + 1e-12)
                           for k in net.neighbours(h)), (j, i)
    if not before.any():
        assert res.placements == tuple(places) and res.changed == ()


@settings(max_examples=100, deadline=None)
@given(cases())
def test_decentralized_shield_keeps_safe_actions_and_candidates(case: Case) -> None:
    net, jobs, places, base = case
    res = decentralized_shield(net, jobs, places, base, ALPHA)
    for p, q in zip(res.placements, places, strict=True):
        _moved_to_neighbours(net, q, p)
    if not _over(net, jobs, places, base).any():
        assert res.placements == tuple(places) and res.changed == ()
    changed = {(j, i) for j, (a, b) in enumerate(zip(places, res.placements, strict=True))
               for i, (x, y) in enumerate(zip(a.nodes, b.nodes, strict=True)) if x != y}
    assert changed <= set(res.changed)


def test_collision_of_two_agents_moves_one_layer_to_the_least_utilised_node() -> None:
    net = net_of([1.0, 1.0, 1.0, 1.0])
    base = np.array([[0.0, 0], [0.0, 0], [0.0, 0], [0.3, 0]])
    jobs = [job(0, 0.5), job(1, 0.45)]
    res = centralized_shield(net, jobs, [TaskPlacement((2,)), TaskPlacement((2,))], base, ALPHA)
    # ω ranks job 0's layer first; node 0 and 1 tie at utilisation 0, node 0 wins the tie.
    assert res.changed == ((0, 0),)
    assert res.placements == (TaskPlacement((0,)), TaskPlacement((2,)))


def test_heaviest_layer_moves_first_so_one_change_suffices() -> None:
    net = net_of([1.0, 1.0, 0.5])
    jobs = [job(0, 0.2, 0.6), job(1, 0.25)]
    proposed = [TaskPlacement((1, 1)), TaskPlacement((1,))]
    res = centralized_shield(net, jobs, proposed, np.zeros((3, 2)), ALPHA)
    assert res.changed == ((0, 1),)  # 0.6 leaves node 1 (now 0.45 ≤ 0.9); nothing else moves
    assert res.placements[1] == TaskPlacement((1,)) and res.placements[0].nodes[0] == 1


def test_no_safe_host_leaves_the_action_alone() -> None:
    net = net_of([0.5, 0.5])
    base = np.array([[0.4, 0.0], [0.4, 0.0]])
    res = centralized_shield(net, [job(0, 0.3)], [TaskPlacement((1,))], base, ALPHA)
    assert res.changed == () and res.placements == (TaskPlacement((1,)),)


def test_decentralized_delegate_catches_a_boundary_collision() -> None:
    net = net_of([1.0, 1.0, 1.0, 1.0], xs=[0.0, 1.0, 10.0, 11.0])
    assert sub_clusters(net, 0) == [(0, 1), (2, 3)]
    # Agents 1 and 2 sit in different sub-clusters; both pick node 1: each sub-shield alone
    # sees no overload, the delegate sees the boundary node 1 at 1.0 and moves one layer.
    jobs = [job(1, 0.5), job(2, 0.5)]
    both_on_1 = [TaskPlacement((1,)), TaskPlacement((1,))]
    res = decentralized_shield(net, jobs, both_on_1, np.zeros((4, 2)), ALPHA)
    assert len(res.changed) == 1
    assert not _over(net, jobs, res.placements, np.zeros((4, 2))).any()
    cen = centralized_shield(net, jobs, both_on_1, np.zeros((4, 2)), ALPHA)
    assert len(cen.changed) == 1


def test_demand_weight_is_eq3() -> None:
    assert demand_weight(np.array([0.2, 100.0]), np.array([0.5, 1000.0])) == 0.2 / 0.5 * 0.1


def test_shield_timing_measures_both_shields_on_the_same_actions() -> None:
    from edgewise.modelparallel.network import random_network
    from edgewise.modelparallel.rounds import random_round
    from edgewise.modelparallel.shield_timing import random_proposals, shield_seconds

    net = random_network(10, np.random.default_rng(0))
    rnd = random_round(net, "vgg-16", 100.0, np.random.default_rng(1))
    proposed = random_proposals(rnd, np.random.default_rng(2))
    for job, placement in zip(rnd.jobs, proposed, strict=True):
        assert set(placement.nodes) <= set(net.candidates(job.origin))
    timed = shield_seconds(("vgg-16",), 10, 2, seed=0, repeats=3)
    assert timed["srole-c"] > 0.0 and timed["srole-d"] > 0.0
