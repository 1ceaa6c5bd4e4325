"""Simulates a model update: a policy plans it, a performance model scores the plan (epoch
time with integer batches, total cost of §III-A4, deadline misses).

``simulate(problem, policy, *, seed)`` is the anatomy's simulator (edgewise.anatomy);
``score(problem, plan, truth)`` scores a plan made elsewhere (the benchmark scores plans made
with learned models under the calibrated ground truth).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from edgewise.perf.schema import PerfModel
from edgewise.update.policies import REGISTRY, Policy
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["PlanScore", "UpdateOutcome", "score", "simulate"]


@dataclass(frozen=True, slots=True)
class PlanScore:
    """What a plan costs: epoch time (s), per-worker epoch times, total cost for
    ``problem.epochs`` epochs with transfer and initialisation, each app's exec time (ms) and
    the apps that miss their deadline; ``worker_parts`` has each worker's (t^compute per
    sample, t^update per batch) in seconds, the two terms of its epoch time."""

    epoch_s: float
    worker_epoch_s: Mapping[str, float]
    total_cost_s: float
    exec_ms: Mapping[str, float]
    violations: tuple[str, ...]
    worker_parts: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    """A simulated update: the policy's plan, its score, and ``timings`` (the policy's
    wall-clock ``decision_seconds``), kept apart from the deterministic figures."""

    plan: UpdatePlan
    score: PlanScore
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)


def _worker_times(problem: UpdateProblem, model: PerfModel, state: np.ndarray, b: int,
                  mean_b: float, n: int) -> tuple[float, float]:
    """(t^compute per sample, t^update per batch) of a worker at batch ``b`` (Eq. 5-6)."""
    one = np.array([float(b)])
    t_c = float(model.compute_time(state, one)[0])
    t_u = float(model.update_time(state, one, np.array([mean_b]), np.array([problem.ps_state[0]]),
                                  np.array([float(n)]))[0])
    return t_c, t_u


def score(problem: UpdateProblem, plan: UpdatePlan,
          truth: Mapping[str, PerfModel] | None = None) -> PlanScore:
    """Evaluate ``plan`` with ``truth`` models (default: the problem's own models)."""
    models = truth or problem.models
    workers = plan.workers
    mean_b = float(np.mean([plan.batch_sizes[w] for w in workers])) if workers else 0.0
    epochs: dict[str, float] = {}
    parts: dict[str, tuple[float, float]] = {}
    exec_ms: dict[str, float] = {}
    violations: list[str] = []
    for w in problem.workers:
        model, state = models[w.device_type], np.array([w.state], dtype=np.float64)
        d = plan.shards.get(w.device, 0)
        if d > 0:  # epochTime_i = B_i (b_i t^compute + t^update), B_i = ⌈d_i / b_i⌉ (§III-A3)
            b = plan.batch_sizes[w.device]
            parts[w.device] = t_c, t_u = _worker_times(problem, model, state, b, mean_b,
                                                       len(workers))
            epochs[w.device] = math.ceil(d / b) * (b * t_c + t_u)
            state = model.new_state(state, np.array([float(b)]))
        for app in w.apps:
            exec_ms[app.name] = float(model.exec_time(app.kind, state)[0])
            if exec_ms[app.name] > app.deadline:
                violations.append(app.name)
    total = max((problem.transfer_s_per_sample.get(w, 0.0) * plan.shards[w]
                 + problem.init_s.get(w, 0.0) + epochs[w] * problem.epochs for w in epochs),
                default=0.0)
    return PlanScore(max(epochs.values(), default=0.0), epochs, total, exec_ms,
                     tuple(violations), parts)


def simulate(problem: UpdateProblem, policy: str | Policy, *, seed: int = 0,
             truth: Mapping[str, PerfModel] | None = None) -> UpdateOutcome:
    """Plan with ``policy`` (a registered name or a callable ``(problem, rng) -> plan``; its
    generator comes from ``seed``), then score the plan with ``truth`` (default: the
    problem's own models). Deterministic for a seed apart from ``timings``.

    Raises InfeasibleError (from the policy) when no plan keeps every constraint."""
    plan_with = REGISTRY.get(policy) if isinstance(policy, str) else policy
    started = time.perf_counter()
    plan = plan_with(problem, np.random.default_rng(seed))
    decided = time.perf_counter() - started
    return UpdateOutcome(plan, score(problem, plan, truth), {"decision_seconds": decided})
