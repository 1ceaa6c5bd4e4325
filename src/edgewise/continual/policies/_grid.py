"""The allocation lattice shared by the thief and the exact oracle: multiples of Δ per job."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.estimate import EPS, StreamTable, stream_table
from edgewise.continual.problem import ContinualPlan, ContinualProblem, StreamDecision

__all__ = ["Lattice", "build_lattice", "make_plan"]


@dataclass(frozen=True, slots=True)
class Lattice:
    """Shares are multiples of Δ (Eq. 1: R, I ∈ {0, 1, ..., G/δ} units; we take δ = Δ):
    ``shares[i]`` = iΔ, and the budget Σ shares ≤ G reads Σ i ≤ ``budget`` = ⌊G/Δ⌋. The jobs
    (Algorithm 1 line 1) are every stream's inference and the retraining of the streams in
    ``has_job`` (those with a retraining option left: a stream that finished retraining in
    this window has no retraining job). ``fair`` is line 2's fair allocation in units per job
    id (2v: v's retraining, 2v+1: its inference). ``tables[v]`` is PickConfigs of stream v
    over the grid."""

    problem: ContinualProblem
    shares: NDArray[np.float64]
    fair: tuple[int, ...]
    budget: int
    tables: tuple[StreamTable, ...]
    penalty: float  # per stream below a_MIN: larger than any accuracy sum, so floors come first
    has_job: tuple[bool, ...]

    @property
    def jobs(self) -> list[int]:
        """Job ids, inference jobs first, then retraining jobs."""
        n = len(self.has_job)
        return [2 * v + 1 for v in range(n)] + [2 * v for v in range(n) if self.has_job[v]]

    def score(self, v: int, i_retrain: int, i_infer: int) -> float:
        """Stream v's term of the objective at shares (R, I) = (shares[i], shares[j])."""
        t = self.tables[v]
        value = float(t.retrain_value[i_retrain] * t.infer_factor[i_infer])
        return value if t.infer_ok[i_infer] else value - self.penalty

    def score_matrix(self, v: int) -> NDArray[np.float64]:
        """The stream's objective term for every (R index, I index) pair."""
        t = self.tables[v]
        m = np.outer(t.retrain_value, t.infer_factor)
        return np.asarray(m - np.where(t.infer_ok, 0.0, self.penalty)[None, :])


def fair_units(jobs: list[int], n_ids: int, budget: int) -> tuple[int, ...]:
    """Algorithm 1 line 2 in whole units: ⌊budget / #jobs⌋ each, the remainder one unit per
    job in ``jobs`` order (inference jobs first)."""
    units = [0] * n_ids
    base, extra = divmod(budget, len(jobs))
    for k, job in enumerate(jobs):
        units[job] = base + (1 if k < extra else 0)
    return tuple(units)


def build_lattice(problem: ContinualProblem, checkpoints: bool = False) -> Lattice:
    """The lattice and PickConfigs tables for ``problem``; with ``checkpoints`` the tables
    use the checkpoint-aware estimate (``estimate.checkpoint_value``)."""
    budget = math.floor(problem.accelerators / problem.delta + EPS)
    shares = problem.delta * np.arange(budget + 1, dtype=np.float64)
    tables = tuple(stream_table(s, shares, problem.window_s, problem.a_min, checkpoints)
                   for s in problem.streams)
    has_job = tuple(bool(s.retrain) for s in problem.streams)
    n = len(problem.streams)
    jobs = [2 * v + 1 for v in range(n)] + [2 * v for v in range(n) if has_job[v]]
    return Lattice(problem, shares, fair_units(jobs, 2 * n, budget), budget, tables,
                   float(n + 1), has_job)


def make_plan(lattice: Lattice, alloc: list[int] | NDArray[np.int64]) -> ContinualPlan:
    """The plan for job indices ``alloc`` = [R_0, I_0, R_1, I_1, ...] on the lattice (R_v is
    ignored, and the share 0, when stream v has no retraining job)."""
    decisions, total, violations = [], 0.0, 0
    for v, stream in enumerate(lattice.problem.streams):
        i_r, i_i = int(alloc[2 * v]), int(alloc[2 * v + 1])
        t = lattice.tables[v]
        pick = int(t.retrain_pick[i_r])
        decisions.append(StreamDecision(
            stream.name, stream.retrain[pick].config if pick >= 0 else None,
            stream.inference[int(t.infer_pick[i_i])].config,
            float(lattice.shares[i_r]) if lattice.has_job[v] else 0.0,
            float(lattice.shares[i_i])))
        total += float(t.retrain_value[i_r] * t.infer_factor[i_i])
        violations += 0 if t.infer_ok[i_i] else 1
    return ContinualPlan(tuple(decisions), total / len(decisions), violations)
