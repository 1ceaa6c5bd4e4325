"""The cost model of Deep-Edge §III-A, vectorised over the workers of a candidate plan."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.perf.models import get_max_batch_size
from edgewise.perf.schema import PerfModel
from edgewise.update.problem import UpdateProblem

__all__ = [
    "Costs", "costs", "deployed_exec_ms", "integer_shards", "max_batch_sizes",
    "pressure_batch_caps",
]

Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Costs:
    """Per worker of ``idx``: t^compute (s/sample), t^update (s/batch), t^total (s/sample,
    Algorithm 1 line 9) and the predicted exec time (ms) and threshold of each app."""

    idx: NDArray[np.int64]
    compute: Array
    update: Array
    total: Array
    violates: NDArray[np.bool_]
    exec_ms: dict[str, float]


def _group(problem: UpdateProblem, idx: NDArray[np.int64]) -> dict[str, NDArray[np.int64]]:
    """Positions within ``idx`` by device type (each type has its own model)."""
    groups: dict[str, list[int]] = {}
    for pos, i in enumerate(idx):
        groups.setdefault(problem.workers[int(i)].device_type, []).append(pos)
    return {t: np.asarray(p, dtype=np.int64) for t, p in groups.items()}


def _pressure(problem: UpdateProblem, workers: NDArray[np.int64], pos: NDArray[np.int64],
              new: Array, model: PerfModel, violates: NDArray[np.bool_],
              exec_ms: dict[str, float]) -> None:
    """EstExecTime of every app on ``workers`` (one model call per app kind); marks the
    positions whose apps would exceed their threshold δ^a (Algorithm 1 lines 11–22)."""
    by_kind: dict[str, list[tuple[int, int, str, float]]] = {}
    for k, (i, p) in enumerate(zip(workers, pos, strict=True)):
        for app in problem.workers[int(i)].apps:
            by_kind.setdefault(app.kind, []).append((k, int(p), app.name, app.threshold_ms))
    for kind, rows in by_kind.items():
        predicted = model.exec_time(kind, new[[r[0] for r in rows]])
        for (_, p, name, limit), ms in zip(rows, predicted, strict=True):
            exec_ms[name] = float(ms)
            violates[p] |= bool(ms > limit)


def costs(problem: UpdateProblem, idx: NDArray[np.int64], batch: Array) -> Costs:
    """Eq. 5–8 for workers ``idx`` at batch sizes ``batch`` (all of them deployed)."""
    n = len(idx)
    states = np.array([problem.workers[int(i)].state for i in idx], dtype=np.float64).reshape(n, 3)
    compute, update = np.empty(n), np.empty(n)
    violates = np.zeros(n, dtype=bool)
    exec_ms: dict[str, float] = {}
    mean_b = np.full(n, batch.mean() if n else 0.0)
    ps_cpu, n_workers = np.full(n, problem.ps_state[0]), np.full(n, float(n))
    for dtype, pos in _group(problem, idx).items():
        model = problem.models[dtype]
        compute[pos] = model.compute_time(states[pos], batch[pos])
        update[pos] = model.update_time(states[pos], batch[pos], mean_b[pos], ps_cpu[pos],
                                        n_workers[pos])
        new = model.new_state(states[pos], batch[pos])
        _pressure(problem, idx[pos], pos, new, model, violates, exec_ms)
    return Costs(idx, compute, update, compute + update / batch, violates, exec_ms)


def max_batch_sizes(problem: UpdateProblem) -> NDArray[np.int64]:
    """GetMaxBatchSize for every candidate worker (one vectorised search per device type):
    the largest batch in [b_min, b_max] whose predicted memory (EstState^mem) stays within
    ``problem.mem_limit_percent``; 0 if none does."""
    idx = np.arange(len(problem.workers), dtype=np.int64)
    states = np.array([w.state for w in problem.workers], dtype=np.float64)
    out = np.zeros(len(idx), dtype=np.int64)
    for dtype, pos in _group(problem, idx).items():
        out[pos] = get_max_batch_size(problem.models[dtype], states[pos], problem.b_min,
                                      problem.b_max, problem.mem_limit_percent)
    return out


def integer_shards(fractional: Array, total: int) -> NDArray[np.int64]:
    """Largest-remainder rounding: non-negative integers summing to ``total``."""
    if fractional.sum() <= 0:
        return np.zeros(len(fractional), dtype=np.int64)
    scaled = fractional * total / fractional.sum()
    base: NDArray[np.int64] = np.floor(scaled).astype(np.int64)
    order = np.argsort(-(scaled - base), kind="stable")
    base[order[: total - int(base.sum())]] += 1
    return base


def deployed_exec_ms(problem: UpdateProblem, exec_ms: dict[str, float],
                     shards: NDArray[np.int64]) -> dict[str, float]:
    """The predicted exec times of the apps on the workers that got data."""
    names = {a.name for w, s in zip(problem.workers, shards, strict=True) if s > 0 for a in w.apps}
    return {n: ms for n, ms in exec_ms.items() if n in names}


def pressure_batch_caps(problem: UpdateProblem, max_b: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per worker, the largest batch (halving from its GetMaxBatchSize, down to b_min) at
    which none of its background apps is predicted to exceed δ^a; 0 where even b_min does.
    A worker's pressure depends on its own state and batch only (Eq. 7–8), so each candidate
    batch is one vectorised evaluation over all workers."""
    caps = np.zeros(len(max_b), dtype=np.int64)
    trial = max_b.copy()
    undecided = trial >= problem.b_min
    while undecided.any():
        idx = np.flatnonzero(undecided).astype(np.int64)
        ok = ~costs(problem, idx, trial[idx].astype(np.float64)).violates
        caps[idx[ok]] = trial[idx[ok]]
        undecided[idx[ok]] = False
        trial[idx] //= 2
        undecided &= trial >= problem.b_min
    return caps
