"""Deep-Edge's scheduling heuristic, Algorithm 1 (§IV-C2), line by line."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import InfeasibleError
from edgewise.update.cost import (
    Costs,
    costs,
    deployed_exec_ms,
    integer_shards,
    max_batch_sizes,
    pressure_batch_caps,
)
from edgewise.update.policies import register
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["algorithm_1", "batch_limits", "deep_edge", "deep_edge_literal"]

Array = NDArray[np.float64]


def _batches(max_b: NDArray[np.int64], d: Array, b_min: int) -> Array:
    """Line 6: b_i = min(GetMaxBatchSize(X_i^mem), d_i), kept >= b_min (constraint 2)."""
    return np.maximum(np.minimum(max_b, np.floor(d)), b_min).astype(np.float64)


def _inner(problem: UpdateProblem, active: list[int], d: Array, max_b: NDArray[np.int64]
           ) -> tuple[list[int], Array, Array, Costs | None, int]:
    """Lines 5–28: proportional sharding until ||D_new − D||₂ ≤ ε or τ iterations; removes
    workers whose background apps would exceed δ. Returns W, D, B, the last costs, iters."""
    batch, last, iters = np.zeros(len(d)), None, 0
    while active:
        idx = np.asarray(active, dtype=np.int64)
        batch = np.zeros(len(d))
        batch[idx] = _batches(max_b[idx], d[idx], problem.b_min)          # line 6
        last = costs(problem, idx, batch[idx])                             # lines 7–9
        d_new = np.zeros(len(d))
        d_new[idx] = problem.n_samples / (last.total * np.sum(1.0 / last.total))  # line 10
        for k in np.flatnonzero(last.violates):                            # lines 11–22
            d_new[idx[k]], batch[idx[k]] = 0.0, 0.0
        active = [i for k, i in enumerate(active) if not last.violates[k]]
        iters += 1                                                         # line 23
        converged = np.linalg.norm(d_new - np.where(np.isinf(d), 0.0, d)) <= problem.epsilon
        d = d_new
        if converged or iters >= problem.tau:                              # lines 24–26
            break
    return active, d, batch, last, iters


@register("deep-edge")
def deep_edge(problem: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
    """Algorithm 1 with GetMaxBatchSize enforcing both of a worker's own constraints: memory
    (as the paper's) and the pressure on its background apps (constraint 4). A worker whose
    apps would miss their deadline at its largest memory-feasible batch is shrunk to the
    largest batch that keeps them within δ (halving), and dropped only if even b_min does
    not; everything else is :func:`deep_edge_literal`."""
    return algorithm_1(problem, batch_limits(problem, shrink=True), "deep-edge")


@register("deep-edge-literal")
def deep_edge_literal(problem: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
    """Algorithm 1: iterate proportional shards d_i ∝ 1/t_i^total with batch sizes from
    GetMaxBatchSize, drop workers whose apps would miss their deadlines, then drop the
    slowest worker while the epoch time improves (lines 29–37).

    Readings of the pseudo-code: the iteration counter is reset for each inner loop (with
    ``Iter == τ`` and one counter, a second inner loop could never stop on τ); the stored
    solution is D_new, the shards the constraint check has just cleaned (D of line 32 may
    still hold a worker removed in that iteration); a worker whose memory cannot take even
    b_min samples (GetMaxBatchSize = 0) is not a candidate.

    Raises InfeasibleError if no worker can take the job without a deadline violation.
    """
    return algorithm_1(problem, batch_limits(problem, shrink=False), "deep-edge-literal")


def batch_limits(problem: UpdateProblem, *, shrink: bool) -> NDArray[np.int64]:
    """Each worker's largest batch: GetMaxBatchSize (memory), and with ``shrink`` the
    pressure on its apps too; 0 for a worker that cannot take the job."""
    max_b = max_batch_sizes(problem)
    return pressure_batch_caps(problem, max_b) if shrink else max_b


def algorithm_1(problem: UpdateProblem, max_b: NDArray[np.int64], name: str) -> UpdatePlan:
    """Algorithm 1 with each worker's batch at most ``max_b`` (:func:`batch_limits`; the
    goodput policy caps them further, policies/goodput.py)."""
    active = [i for i in range(len(problem.workers)) if max_b[i] > 0]
    d = np.full(len(problem.workers), np.inf)
    best: tuple[float, Array, Array, Costs] | None = None
    total_iters = 0
    while active:
        active, d, batch, last, iters = _inner(problem, active, d, max_b)
        total_iters += iters
        if not active or last is None:
            break
        keep = ~last.violates
        epoch = float(np.max(d[last.idx[keep]] * last.total[keep]))       # line 29
        if best is not None and epoch >= best[0]:                           # line 36
            break
        best = (epoch, d.copy(), batch.copy(), last)                        # lines 30–32
        slowest = int(last.idx[keep][np.argmax(last.total[keep])])          # line 33
        active = [i for i in active if i != slowest]                        # line 34
        d[slowest] = 0.0
    if best is None:
        raise InfeasibleError("no worker can take the model update without a background app "
                              "missing its deadline (or without running out of memory)")
    return _plan(problem, best, total_iters, name)


def _plan(problem: UpdateProblem, best: tuple[float, Array, Array, Costs],
          iterations: int, name: str) -> UpdatePlan:
    epoch, d, batch, last = best
    shards = integer_shards(d, problem.n_samples)
    names = [w.device for w in problem.workers]
    return UpdatePlan(
        shards={n: int(s) for n, s in zip(names, shards, strict=True) if s > 0},
        batch_sizes={n: int(b) for n, b, s in zip(names, batch, shards, strict=True) if s > 0},
        predicted_epoch_s=epoch,
        predicted_exec_ms=deployed_exec_ms(problem, last.exec_ms, shards),
        policy=name,
        iterations=iterations,
    )
