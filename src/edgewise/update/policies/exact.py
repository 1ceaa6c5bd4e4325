"""Exact oracle for small clusters: every worker subset × every feasible batch assignment,
with optimal continuous shards, under the same cost model and constraints as Deep-Edge."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.update.cost import costs, deployed_exec_ms, integer_shards, max_batch_sizes
from edgewise.update.policies import register
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["MAX_EXACT_WORKERS", "exact"]

MAX_EXACT_WORKERS = 8
Array = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _Option:
    """One worker at one batch size: t^compute, and whether its apps stay within δ."""

    worker: int
    batch: int
    compute: float
    feasible: bool


def _options(problem: UpdateProblem, max_b: NDArray[np.int64]) -> list[list[_Option]]:
    """Per worker, its feasible batch sizes (powers of two in [b_min, GetMaxBatchSize]).

    t^compute and the pressure depend on a worker's own state and batch only (Eq. 5, 7, 8),
    so they are evaluated once per (worker, batch)."""
    out: list[list[_Option]] = []
    for i, cap in enumerate(max_b):
        sizes = [1 << k for k in range(int(cap).bit_length()) if problem.b_min <= 1 << k <= cap]
        opts = []
        for b in sizes:
            c = costs(problem, np.array([i], dtype=np.int64), np.array([float(b)]))
            opts.append(_Option(i, b, float(c.compute[0]), not bool(c.violates[0])))
        out.append([o for o in opts if o.feasible])
    return out


def _update_times(problem: UpdateProblem, combos: list[tuple[_Option, ...]]) -> Array:
    """EstUpdateTime of every (combo, worker), one model call per device type."""
    rows = [(o, combo) for combo in combos for o in combo]
    out = np.empty(len(rows))
    by_type: dict[str, list[int]] = {}
    for r, (o, _) in enumerate(rows):
        by_type.setdefault(problem.workers[o.worker].device_type, []).append(r)
    for dtype, rs in by_type.items():
        states = np.array([problem.workers[rows[r][0].worker].state for r in rs])
        batch = np.array([float(rows[r][0].batch) for r in rs])
        mean_b = np.array([np.mean([o.batch for o in rows[r][1]]) for r in rs])
        n_w = np.array([float(len(rows[r][1])) for r in rs])
        ps = np.full(len(rs), problem.ps_state[0])
        out[rs] = problem.models[dtype].update_time(states, batch, mean_b, ps, n_w)
    return out


def _search(problem: UpdateProblem,
            options: list[list[_Option]]) -> tuple[float, tuple[_Option, ...]]:
    combos = [combo
              for size in range(1, len(options) + 1)
              for subset in itertools.combinations([o for o in options if o], size)
              for combo in itertools.product(*subset)]
    if not combos:
        raise InfeasibleError("no worker can take the model update without a background app "
                              "missing its deadline (or without running out of memory)")
    update = _update_times(problem, combos)
    best, pos = (np.inf, combos[0]), 0
    for combo in combos:
        u = update[pos : pos + len(combo)]
        pos += len(combo)
        rate = sum(1.0 / (o.compute + u_k / o.batch) for o, u_k in zip(combo, u, strict=True))
        if problem.n_samples / rate < best[0]:
            best = (problem.n_samples / rate, combo)
    return best


@register("exact")
def exact(problem: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
    """The minimum epoch time over all worker subsets and batch assignments; with workers
    and batches fixed the optimal continuous shards are d_i ∝ 1/t_i^total, so the epoch time
    is |M| / Σ 1/t_i^total. Cost: Π_i (1 + G_i) assignments for G_i batch sizes per worker
    (N <= 8). ``predicted_epoch_s`` is the continuous optimum: a lower bound for integer
    shards under the same model."""
    n = len(problem.workers)
    if n > MAX_EXACT_WORKERS:
        raise ConfigError(f"exact handles at most {MAX_EXACT_WORKERS} workers, got {n}",
                          field="workers")
    epoch, combo = _search(problem, _options(problem, max_batch_sizes(problem)))
    idx = np.array([o.worker for o in combo], dtype=np.int64)
    batch = np.array([float(o.batch) for o in combo])
    c = costs(problem, idx, batch)
    shards = np.zeros(n, dtype=np.int64)
    shards[idx] = integer_shards(1.0 / c.total, problem.n_samples)
    names = [w.device for w in problem.workers]
    return UpdatePlan(
        shards={names[i]: int(shards[i]) for i in idx if shards[i] > 0},
        batch_sizes={names[o.worker]: o.batch for o in combo if shards[o.worker] > 0},
        predicted_epoch_s=epoch,
        predicted_exec_ms=deployed_exec_ms(problem, c.exec_ms, shards),
        policy="exact",
    )
