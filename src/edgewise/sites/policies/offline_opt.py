"""offline-opt: problem (2) solved exactly as a MILP with HiGHS on small instances (the
denominator of the performance ratio, §V-C). y·s in Eq. 1 is linearised (z ≥ y − Y(1 − s))
and t_i of (2e) by one-hot completion binaries e_i(t)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import highspy
import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.sites.placement import assignable
from edgewise.sites.policies import Rule, SlotState, register
from edgewise.sites.problem import Job, JobSlot, SitesProblem, Transfer

__all__ = ["OfflineOpt", "offline_opt", "solve_offline"]

TIME_LIMIT_S = 120.0


@dataclass(slots=True)
class _Model:
    """Column and row builder over highspy's low-level API."""

    highs: highspy.Highs
    n_cols: int = 0
    ints: list[int] = field(default_factory=list)

    def col(self, cost: float, ub: float, integer: bool = True) -> int:
        self.highs.addCol(float(cost), 0.0, float(ub), 0, np.array([], dtype=np.int32),
                          np.array([], dtype=np.float64))
        if integer:
            self.ints.append(self.n_cols)
        self.n_cols += 1
        return self.n_cols - 1

    def row(self, lb: float, ub: float, terms: list[tuple[int, float]]) -> None:
        idx = np.array([c for c, _ in terms], dtype=np.int32)
        val = np.array([v for _, v in terms], dtype=np.float64)
        self.highs.addRow(float(lb), float(ub), len(idx), idx, val)


@dataclass(frozen=True, slots=True)
class _JobVars:
    y: dict[tuple[int, int], int]              # (t, r)
    s: dict[tuple[int, int], int]
    g: dict[tuple[int, int, int], int]         # (t, src, dst)
    e: dict[int, int]


def _job_vars(m: _Model, problem: SitesProblem, job: Job, cap: np.ndarray) -> _JobVars:
    """Columns, the objective (2) and constraints (2a)-(2c), (2e)-(2g) of one job."""
    n, inf = problem.n_sites, highspy.kHighsInf
    slots = range(job.arrival, problem.horizon)
    ymax = np.minimum(np.maximum(assignable(job, cap), 0),
                      math.ceil(job.total_chunks / job.chunks_per_worker))
    v = _JobVars({}, {}, {}, {})
    for t in slots:
        v.e[t] = m.col(job.latency(t + 1 - job.arrival), 1)
        for r in range(n):
            v.y[t, r] = m.col(0.0, float(ymax[r]))
            v.s[t, r] = m.col(0.0, 1)
            for src in range(n):
                cost = problem.q[src][r] * job.chunk_mb
                v.g[t, src, r] = m.col(cost, float(job.data[src]))
    m.row(1, 1, [(v.e[t], 1.0) for t in slots])                                    # (2e)
    for src in range(n):                                                            # (2a)
        m.row(job.data[src], job.data[src], [(v.g[t, src, r], 1.0) for t in slots
                                             for r in range(n)])
    for t in slots:
        m.row(-inf, 1, [(v.s[t, r], 1.0) for r in range(n)])                        # (2c)
        m.row(-inf, 0, [(v.s[t, r], 1.0) for r in range(n)] +
              [(v.y[t, r], -1.0) for r in range(n)])                                # PS ⇒ y
        m.row(-inf, 0, [(v.e[t], 1.0)] + [(v.y[t, r], -1.0) for r in range(n)])      # t_i active
        for r in range(n):
            m.row(0, inf, [(v.y[t, r], job.rho)] +
                  [(v.g[t, src, r], -float(job.epochs)) for src in range(n)])       # (2b)
            m.row(-inf, 0, [(v.y[t, r], 1.0)] + [(v.s[t, x], -float(ymax[r]))
                                                 for x in range(n)])                # y ⇒ PS
            m.row(-inf, 0, [(v.y[t, r], 1.0)] + [(v.e[u], -float(ymax[r]))
                                                 for u in slots if u >= t])         # t <= t_i
            for ps in range(n):
                if ps != r:
                    z = m.col(problem.q[r][ps] * job.param_mb, inf, integer=False)
                    m.row(-inf, float(ymax[r]), [(v.y[t, r], 1.0), (v.s[t, ps], float(ymax[r])),
                                                 (z, -1.0)])                        # z >= y·s
    return v


def _capacity_rows(m: _Model, problem: SitesProblem, jvars: dict[str, _JobVars]) -> None:
    """(2d) per slot, site and resource type."""
    for t in range(problem.horizon):
        for r, site in enumerate(problem.sites):
            for k in range(4):
                terms = []
                for job in problem.jobs:
                    v = jvars[job.name]
                    if (t, r) in v.y:
                        if job.worker_demand[k]:
                            terms.append((v.y[t, r], job.worker_demand[k]))
                        if job.ps_demand[k]:
                            terms.append((v.s[t, r], job.ps_demand[k]))
                if terms:
                    m.row(-highspy.kHighsInf, site.capacity[k], terms)


def _entries(problem: SitesProblem, jvars: dict[str, _JobVars],
             x: np.ndarray) -> Iterator[JobSlot]:
    n = problem.n_sites
    for job in problem.jobs:
        v = jvars[job.name]
        for t in range(job.arrival, problem.horizon):
            y = tuple(round(x[v.y[t, r]]) for r in range(n))
            if sum(y) == 0:
                continue
            ps = max(range(n), key=lambda r: x[v.s[t, r]])
            moves = tuple(Transfer(src, r, round(x[v.g[t, src, r]])) for r in range(n)
                          for src in range(n) if round(x[v.g[t, src, r]]) > 0)
            yield JobSlot(job.name, t, y, ps, moves)


def solve_offline(problem: SitesProblem,
                  time_limit_s: float = TIME_LIMIT_S) -> tuple[tuple[JobSlot, ...], float]:
    """The optimal schedule of problem (2) within the horizon T and its objective value;
    InfeasibleError when no schedule finishes every job by T or HiGHS proves no optimum."""
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", 1e-7)
    h.setOptionValue("threads", 1)
    m = _Model(h)
    cap = np.array([s.capacity for s in problem.sites], dtype=np.float64)
    jvars = {job.name: _job_vars(m, problem, job, cap) for job in problem.jobs}
    _capacity_rows(m, problem, jvars)
    idx = np.array(m.ints, dtype=np.int32)
    h.changeColsIntegrality(len(idx), idx,
                            np.full(len(idx), highspy.HighsVarType.kInteger))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        status = h.modelStatusToString(h.getModelStatus())
        raise InfeasibleError(f"offline-opt: HiGHS ended with {status} "
                              f"(horizon {problem.horizon})")
    x = np.asarray(h.getSolution().col_value)
    return tuple(_entries(problem, jvars, x)), float(h.getInfo().objective_function_value)


class OfflineOpt(Rule):
    """Replays the offline optimum slot by slot (it sees the future: the ratio's yardstick)."""

    def __init__(self, problem: SitesProblem, rng: np.random.Generator) -> None:
        entries, self.objective = solve_offline(problem)
        self.by_slot: dict[int, list[JobSlot]] = {}
        for e in entries:
            self.by_slot.setdefault(e.slot, []).append(e)

    def step(self, state: SlotState) -> tuple[JobSlot, ...]:
        return tuple(self.by_slot.get(state.slot, ()))


@register("offline-opt")
def offline_opt(problem: SitesProblem, rng: np.random.Generator) -> OfflineOpt:
    """The exact offline optimum (small instances only)."""
    return OfflineOpt(problem, rng)
