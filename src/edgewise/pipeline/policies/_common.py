"""Cost tables, the objective, and the distinct-node path search shared by the policies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import InfeasibleError
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem, bottleneck_s

__all__ = ["Budget", "SearchBudgetExceeded", "Tables", "feasible_path", "interchangeable",
           "make_plan", "matchable", "no_split", "objective", "parts_needed", "tables"]

Array = NDArray[np.float64]
Path = tuple[tuple[int, ...], tuple[int, ...]]
_MAX_NOGOODS = 16


class SearchBudgetExceeded(Exception):
    """The path search expanded more states than its budget allowed."""


@dataclass(slots=True)
class Budget:
    """Search calls left, shared by successive searches."""

    left: int


def objective(problem: PipelineProblem, cuts: Sequence[int], nodes: Sequence[int]) -> float:
    """Eq. 2–3's bottleneck latency, plus each stage's compute time when ``gflops`` is given.

    Every policy reports this, so that plans of different policies compare."""
    return bottleneck_s(problem, tuple(cuts), tuple(nodes),
                        include_compute=problem.gflops is not None)


def make_plan(problem: PipelineProblem, cuts: Sequence[int], nodes: Sequence[int],
              policy: str) -> PipelinePlan:
    """A plan whose ``bottleneck_s`` is :func:`objective` of its cuts and nodes."""
    c, n = tuple(int(x) for x in cuts), tuple(int(x) for x in nodes)
    return PipelinePlan(c, n, objective(problem, c, n), policy)


def no_split(problem: PipelineProblem) -> InfeasibleError:
    """The error of a policy that found no split: the model's memory beside the devices',
    so that a model too big for the devices given names what it needs and what they
    have (and otherwise, that the split, not the sum, does not fit)."""
    chain, memory = problem.chain, problem.memory_bytes
    k = int(np.argmax(memory))
    n = len(problem.nodes)
    devices = f"{n} device" if n == 1 else f"{n} distinct devices"
    return InfeasibleError(
        f"no split of {chain.name!r} fits {devices} over finite links: it needs "
        f"{sum(chain.memory_bytes):,} B; " + (
            f"device {problem.nodes[k]!r} has {memory[k]:,} B" if n == 1 else
            f"the devices have {sum(memory):,} B together, the largest "
            f"({problem.nodes[k]!r}) {memory[k]:,} B"))


@dataclass(frozen=True, slots=True, eq=False)
class Tables:
    """Per-instance tables. Vertex 0 is the dispatcher, vertex ``v + 1`` node ``v``.

    ``times[i, a, b]`` is the time to send the input of a partition starting at segment
    ``i`` (η(p_0) for ``i == 0``, else the output of segment ``i - 1``) over link a→b,
    computed exactly as :func:`bottleneck_s` does (``times[0]`` is zero when the problem
    does not score the dispatcher's transfer); ``compute[i, j, v]`` is segments
    ``i..j`` on node ``v`` (zeros without ``gflops``); ``classes[v]`` the mask of the
    nodes interchangeable with ``v`` (:func:`interchangeable`)."""

    problem: PipelineProblem
    prefix_mem: tuple[int, ...]
    sizes: tuple[int, ...]
    times: Array
    compute: Array
    classes: tuple[int, ...]  # per node, the mask of the nodes interchangeable with it

    @property
    def n_seg(self) -> int:
        return len(self.sizes)

    @property
    def n_nodes(self) -> int:
        return len(self.problem.nodes)

    def mem(self, i: int, j: int) -> int:
        """Memory of segments ``i..j`` inclusive."""
        return self.prefix_mem[j + 1] - self.prefix_mem[i]

    def fits(self, i: int, j: int, v: int) -> bool:
        """Whether segments ``i..j`` fit node ``v``'s own memory κ_v."""
        return self.mem(i, j) <= self.problem.memory_bytes[v]


def tables(problem: PipelineProblem) -> Tables:
    """Build :class:`Tables`; InfeasibleError if a segment fits no node (Eq. 6 is empty)."""
    chain, n = problem.chain, len(problem.nodes)
    biggest = max(problem.memory_bytes)
    too_big = [i for i, m in enumerate(chain.memory_bytes) if m > biggest]
    if too_big:
        raise InfeasibleError(f"segment {too_big[0]} of {chain.name!r} needs "
                              f"{chain.memory_bytes[too_big[0]]} B, more than the largest "
                              f"node's memory ({biggest} B)")
    sizes = (chain.input_bytes, *chain.output_bytes[:-1])
    bw = problem.bandwidth_mbps
    with np.errstate(divide="ignore"):
        times = np.stack([np.where(bw > 0, s / problem.compression * 8 / (bw * 1e6), np.inf)
                          for s in sizes])
    if not problem.dispatcher_transfer:
        times[0] = 0.0
    compute = np.zeros((len(sizes), len(sizes), n))
    if problem.gflops is not None:
        speed = np.asarray(problem.gflops, dtype=np.float64) * 1e9
        for i in range(len(sizes)):
            for j in range(i, len(sizes)):
                compute[i, j] = sum(chain.flops[i:j + 1]) / speed
    prefix = np.concatenate([[0], np.cumsum(chain.memory_bytes, dtype=np.int64)])
    return Tables(problem, tuple(int(x) for x in prefix), sizes, times, compute,
                  interchangeable(problem))


def matchable(part_mem: Sequence[int], node_mem: Sequence[int]) -> bool:
    """Whether partitions can go to distinct nodes they fit: the k-th largest partition
    must fit the k-th largest node (Hall's condition for nested neighbourhoods)."""
    if len(part_mem) > len(node_mem):
        return False
    nodes = sorted(node_mem, reverse=True)
    return all(m <= k for m, k in zip(sorted(part_mem, reverse=True), nodes, strict=False))


def parts_needed(t: Tables, i: int, free: Sequence[int]) -> int:
    """Fewest partitions that cover segments ``i..`` if every one could use the largest
    memory among nodes ``free`` (a lower bound; 0 when ``i`` is past the end)."""
    kappa = max((t.problem.memory_bytes[v] for v in free), default=-1)
    count = 0
    while i < t.n_seg:
        if t.mem(i, i) > kappa:
            return t.n_seg + 1  # this segment fits none of them
        j = i
        while j + 1 < t.n_seg and t.mem(i, j + 1) <= kappa:
            j += 1
        i, count = j + 1, count + 1
    return count


def _min_parts(t: Tables) -> list[int]:
    """``out[i]``: fewest partitions that cover segments ``i..`` on the largest memory
    (greedy longest ranges are optimal for a count)."""
    kappa, out = max(t.problem.memory_bytes), [0] * (t.n_seg + 1)
    for i in range(t.n_seg - 1, -1, -1):
        j = i
        while j + 1 < t.n_seg and t.mem(i, j + 1) <= kappa:
            j += 1
        out[i] = 1 + out[j + 1]
    return out


def interchangeable(problem: PipelineProblem) -> tuple[int, ...]:
    """For each node, the bit mask of the nodes interchangeable with it (itself included):
    the same memory and speed, and the same link rate to and from every other vertex, the
    dispatcher included, and between the two either way. Swapping two such nodes changes
    no transfer, compute or memory figure of any plan."""
    n, bw = len(problem.nodes), problem.bandwidth_mbps
    speed = problem.gflops

    def same(u: int, w: int) -> bool:
        if problem.memory_bytes[u] != problem.memory_bytes[w]:
            return False
        if speed is not None and speed[u] != speed[w]:
            return False
        others = [k for k in range(n + 1) if k not in (u + 1, w + 1)]
        return (bool(np.array_equal(bw[u + 1, others], bw[w + 1, others]))
                and bool(np.array_equal(bw[others, u + 1], bw[others, w + 1]))
                and bw[u + 1, w + 1] == bw[w + 1, u + 1])

    reps: list[int] = []
    rep_of = list(range(n))
    for v in range(n):  # a swap of two is a symmetry, so the relation is transitive
        rep_of[v] = next((r for r in reps if same(r, v)), v)
        if rep_of[v] == v:
            reps.append(v)
    mask = dict.fromkeys(reps, 0)
    for v in range(n):
        mask[rep_of[v]] |= 1 << v
    return tuple(mask[rep_of[v]] for v in range(n))


@dataclass(slots=True)
class _Search:
    t: Tables
    beta: float
    budget: Budget
    min_parts: list[int]
    distinct: bool = True
    nogoods: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    cache: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)

    def options(self, i: int, v: int) -> list[tuple[int, int]]:
        """``(end, next node)`` moves from partition start ``i`` on ``v``, whatever is used:
        longest partition first (fewer transfers), then fastest link; ``(last, -1)`` ends."""
        if (i, v) not in self.cache:
            t, last, out = self.t, self.t.n_seg - 1, []
            stop = i  # memory and compute only grow with the partition's end
            while stop <= last and t.fits(i, stop, v) and t.compute[i, stop, v] <= self.beta:
                stop += 1
            for end in range(stop - 1, i - 1, -1):
                if end == last:
                    out.append((end, -1))
                    continue
                row = t.times[end + 1, v + 1, 1:]
                ok = (row <= self.beta) & np.isfinite(row) & (
                    t.compute[end + 1, end + 1] <= self.beta)
                out += [(end, w) for w in np.flatnonzero(ok)[np.argsort(row[ok],
                                                                         kind="stable")]
                        .tolist() if t.fits(end + 1, end + 1, w)]
            self.cache[i, v] = out
        return self.cache[i, v]

    def run(self, i: int, v: int, used: int) -> tuple[list[int], list[int]] | int:
        """From partition start ``i`` on node ``v`` (in ``used``): ``(ends, nodes)``
        reversed, or on failure its nogood — the used nodes it was refused, so that the
        state fails for every used set containing them."""
        self.budget.left -= 1  # every call counts, memo hits included: budget ∝ time
        if self.budget.left < 0:
            raise SearchBudgetExceeded
        for nogood in self.nogoods.get((i, v), ()):
            if nogood & ~used == 0:
                return nogood
        if self.distinct and self.min_parts[i] - 1 > self.t.n_nodes - used.bit_count():
            blockers = used  # too few free nodes left; fewer still with more used
        else:
            blockers = 0
            for end, w in self.options(i, v):
                if w < 0:
                    return [end], [v]
                free = self.t.classes[w] & ~used if self.distinct else 1 << w
                if used >> w & 1:
                    if not free:  # every node like w is used: refused for what is used
                        blockers |= 1 << w
                    continue
                if free & ((1 << w) - 1):  # a node interchangeable with w comes first
                    continue
                sub = self.run(end + 1, w, used | 1 << w if self.distinct else 0)
                if isinstance(sub, tuple):
                    return [*sub[0], end], [*sub[1], v]
                blockers |= sub & ~(1 << w)  # w is this branch's own choice
        known = self.nogoods.setdefault((i, v), [])
        known.append(blockers)
        if len(known) > _MAX_NOGOODS:  # forgetting a nogood costs time, never exactness
            del known[0]
        return blockers


def feasible_path(t: Tables, beta: float, budget: int | Budget = 200_000, *,
                  distinct: bool = True) -> Path | None:
    """A plan whose every transfer and stage takes ≤ ``beta``, or None if there is none.

    Depth-first search over states (segment ``i``, node ``v``, used-node set) with nogood
    learning: a failed state records the used nodes it was refused (its nogood) and fails
    at once for any later used set containing them (an empty nogood: it always fails).
    The search is therefore exact; it expands at most ``n_seg · n · 2^n`` states, far
    fewer in practice, and raises :class:`SearchBudgetExceeded` after ``budget`` calls
    (state visits, memo hits included; a :class:`Budget` is shared across calls).
    Infinite times (no link) are never accepted, even for ``beta = inf``.
    With ``distinct=False`` nodes may repeat (a relaxation, O(n_seg² · n²)).

    Interchangeable nodes (:func:`interchangeable`: same speed, memory and links) are
    tried lowest first, so the used nodes of each such class are always its lowest ones and
    a state stands for every way of choosing them: the states fall from subsets of nodes
    to counts per class, as in PipeEdge's programme over device types. This keeps the
    search exact: swapping two interchangeable nodes maps any plan to one as good."""
    shared = budget if isinstance(budget, Budget) else Budget(budget)
    search = _Search(t, beta, shared, _min_parts(t), distinct)
    first = t.times[0, 0, 1:]
    ok = (first <= beta) & np.isfinite(first) & (t.compute[0, 0] <= beta)
    for v in np.flatnonzero(ok)[np.argsort(first[ok], kind="stable")].tolist():
        if not t.fits(0, 0, v) or (distinct and t.classes[v] & ((1 << v) - 1)):
            continue
        found = search.run(0, v, 1 << v if distinct else 0)
        if isinstance(found, tuple):
            ends, nodes = found
            cuts = (0, *(e + 1 for e in reversed(ends)))
            return cuts, tuple(reversed(nodes))
    return None
