"""PipeEdge's partitioner (Hu et al., DSD 2022): a dynamic program over the layers in
order and the devices, heterogeneous in compute, memory and bandwidth, minimising the
slowest stage (compute or transfer). Devices that are interchangeable form one type, so the
program counts how many of each type are used instead of which ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgewise.errors import ConfigError
from edgewise.pipeline.policies import register
from edgewise.pipeline.policies._common import Tables, make_plan, no_split, tables
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["device_types", "pipeedge"]

_INF = float("inf")


def _same_type(p: PipelineProblem, a: int, b: int) -> bool:
    """Whether nodes ``a`` and ``b`` can swap: same memory and speed, same bandwidth to the
    dispatcher and to every other node (their own link is symmetric)."""
    if p.memory_bytes[a] != p.memory_bytes[b]:
        return False
    if p.gflops is not None and p.gflops[a] != p.gflops[b]:
        return False
    bw = p.bandwidth_mbps
    others = [x for x in range(len(p.nodes) + 1) if x not in (a + 1, b + 1)]
    return bool(np.array_equal(bw[a + 1, others], bw[b + 1, others]))


def device_types(problem: PipelineProblem) -> list[list[int]]:
    """Nodes grouped into types of interchangeable devices (PipeEdge's device types), in
    order of first appearance. The relation is an equivalence, so comparing a node with
    each type's first member suffices."""
    types: list[list[int]] = []
    for v in range(len(problem.nodes)):
        for members in types:
            if _same_type(problem, members[0], v):
                members.append(v)
                break
        else:
            types.append([v])
    return types


@dataclass(frozen=True, slots=True)
class _Types:
    """Device types: members, counts, the mixed radix of the used-count vector ``S``, and
    ``link[U, V]``: the vertex pair of a link from a type-U device to a distinct type-V one."""

    members: tuple[tuple[int, ...], ...]
    radix: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.members)

    def used(self, state: int, u: int) -> int:
        return state // self.radix[u] % (len(self.members[u]) + 1)

    def free(self, state: int, u: int) -> bool:
        return self.used(state, u) < len(self.members[u])

    def link(self, u: int, v: int) -> tuple[int, int]:
        """Vertices (node + 1) of one type-``u`` device and another, distinct, type-``v``."""
        a = self.members[u][0]
        b = self.members[v][1] if u == v else self.members[v][0]
        return a + 1, b + 1


def _types(problem: PipelineProblem, max_states: int) -> _Types:
    members = tuple(tuple(m) for m in device_types(problem))
    radix, size = [], 1
    for m in members:
        radix.append(size)
        size *= len(m) + 1
    if size > max_states:
        raise ConfigError(f"pipeedge: {len(members)} device types give {size} used-count "
                          f"states, more than max_states={max_states}", field="nodes")
    return _Types(members, tuple(radix))


def _tables(t: Tables, ty: _Types) -> tuple[list[Any], list[Any], list[Any]]:
    """Per type: compute[i][j] of segments i..j, the last end that fits from each start,
    and send[v][j], the time to send segment j's output to a type-``v`` device (lists:
    the programme's inner loops read Python floats)."""
    comp, ends, send = [], [], []
    for u in range(ty.n):
        rep = ty.members[u][0]
        comp.append(t.compute[:, :, rep].tolist())
        ends.append([max((j for j in range(i, t.n_seg) if t.fits(i, j, rep)), default=i - 1)
                     for i in range(t.n_seg)])
        links: list[list[float]] = []
        for v in range(ty.n):
            if u == v and len(ty.members[u]) < 2:
                links.append([])  # no second device of this type
                continue
            a, b = ty.link(u, v)
            links.append(t.times[1:, a, b].tolist())  # [j]: times[j + 1]
        send.append(links)
    return comp, ends, send


def _program(t: Tables, ty: _Types) -> tuple[float, list[tuple[int, int]]]:
    """h[i][S][u]: the least bottleneck over segments ``0..i-1`` with the devices counted in
    ``S`` used, the next stage on a type-``u`` device, its input transfer included.
    Returns the optimum and its stages as (first segment, type), in order."""
    n_seg, last = t.n_seg, t.n_seg - 1
    comp, ends, send = _tables(t, ty)
    h: list[dict[tuple[int, int], float]] = [{} for _ in range(n_seg)]
    parent: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    for u in range(ty.n):
        h[0][0, u] = float(t.times[0, 0, ty.members[u][0] + 1])
    best, end = _INF, None
    for i in range(n_seg):
        for (state, u), cost in sorted(h[i].items()):
            if cost >= best:
                continue
            after = state + ty.radix[u]
            nexts = [(v, send[u][v]) for v in range(ty.n) if ty.free(after, v)]
            row = comp[u][i]
            for j in range(i, ends[u][i] + 1):  # memory only grows with j
                stage = max(cost, row[j])
                if stage >= best:
                    break  # compute only grows with j
                if j == last:
                    best, end = stage, (i, state, u)
                    continue
                for v, times in nexts:
                    new = max(stage, times[j])
                    if new < h[j + 1].get((after, v), _INF):
                        h[j + 1][after, v] = new
                        parent[j + 1, after, v] = (i, state, u)
    if end is None:
        return _INF, []
    stages, key = [], end
    while True:
        stages.append((key[0], key[2]))
        if key[0] == 0:
            return best, stages[::-1]
        key = parent[key]


@register("pipeedge")
def pipeedge(problem: PipelineProblem, rng: np.random.Generator, *,
             max_states: int = 4096) -> PipelinePlan:
    """PipeEdge's partition and placement (Hu et al., DSD 2022, and its scheduler
    ``sched-pipeline``): the least bottleneck, where a stage costs the larger of its
    compute time and the transfer of its output to the next stage, over layers kept in
    order and devices used at most once, each stage within its device's memory.

    The program runs over (segments covered ``i``, devices used per type ``S``, the next
    stage's type ``u``); a transition gives segments ``i..j`` to a type-``u`` device and
    sends segment ``j``'s output to a free device of type ``v``. Generalised to our
    problem: bandwidth is per pair (PipeEdge's min of two devices' rates is one case), the
    dispatcher's send of the input starts the first stage when the problem scores it, and
    devices are one type only when they are interchangeable (memory, speed and every link).
    Exact for the objective :func:`~edgewise.pipeline.policies._common.objective`.
    O(N² · |S| · T²) for N segments, T types and |S| = ∏(count + 1) states (2^n when every
    device differs); ``rng`` is unused.

    Raises
    ------
    ConfigError
        When the used-count states exceed ``max_states``.
    InfeasibleError
        If no plan fits memory on distinct devices over finite links.
    """
    t = tables(problem)
    ty = _types(problem, max_states)
    best, stages = _program(t, ty)
    if not np.isfinite(best):
        raise no_split(problem)
    taken = [0] * ty.n
    nodes = []
    for _, u in stages:
        nodes.append(ty.members[u][taken[u]])
        taken[u] += 1
    cuts = [first for first, _ in stages] + [t.n_seg]
    return make_plan(problem, cuts, nodes, "pipeedge")
