"""Ekya's trace-driven simulator (§6.1): replays profile traces under a scheduling policy."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.estimate import EPS
from edgewise.continual.policies import Policy, get_policy
from edgewise.continual.problem import ContinualPlan, ContinualProblem
from edgewise.continual.profiles import Trace
from edgewise.continual.replay import (
    Estimates,
    Retraining,
    WindowState,
    epochs_done,
    next_reestimate_s,
    served_area,
    served_checkpoint,
    window_problem,
)
from edgewise.errors import ConfigError

__all__ = ["SimOutcome", "TraceProblem", "first_decision", "simulate"]

Decided = tuple[int, float, ContinualPlan]  # (window, seconds into it, the plan made)


@dataclass(frozen=True, slots=True)
class TraceProblem:
    """What one run of the simulator answers: the streams of ``trace`` (their profiles and
    drift) over ``windows`` windows (None: all) of ``window_s`` seconds on ``accelerators``,
    with Algorithm 1's Δ (``delta``) and inference floor ``a_min``. ``serve_checkpoints``:
    inference serves each epoch's checkpoint while a retraining runs (§4.2/§5, as the real
    runtime does), for every policy; off in the paper's protocol (Figure 4c)."""

    trace: Trace
    accelerators: float
    window_s: float = 200.0
    delta: float = 0.1
    a_min: float = 0.0
    windows: int | None = None
    serve_checkpoints: bool = False

    def __post_init__(self) -> None:
        if not self.accelerators > 0:
            raise ConfigError(f"must be positive, got {self.accelerators}", field="accelerators")
        if not self.window_s > 0:
            raise ConfigError(f"must be positive, got {self.window_s}", field="window_s")
        if not 1 <= self.n_windows <= self.trace.windows:
            raise ConfigError(f"must be in [1, {self.trace.windows}], got {self.n_windows}",
                              field="windows")

    @property
    def n_windows(self) -> int:
        return self.trace.windows if self.windows is None else self.windows

    def first_streams(self, n: int) -> TraceProblem:
        """The same problem on the trace's first ``n`` streams."""
        return replace(self, trace=self.trace.subset(self.trace.streams[:n]))


@dataclass(frozen=True, slots=True)
class SimOutcome:
    """Per-window, per-stream inference accuracy averaged over each window and the plans
    made (window, seconds into it, plan); ``timings``: the decisions' wall-clock seconds
    (median, max and total over all decisions, and the median of those at window starts)."""

    accuracy: NDArray[np.float64]  # shape (windows, streams)
    plans: tuple[Decided, ...] = field(repr=False)
    timings: Mapping[str, float] = field(repr=False)

    @property
    def mean_accuracy(self) -> float:
        return float(self.accuracy.mean())


@dataclass(slots=True)
class _Run:
    """One simulation's fixed inputs and its logs."""

    problem: TraceProblem
    policy: Policy
    rng: np.random.Generator
    profile_error: float
    reestimate_epochs: int
    log: list[Decided] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def decide(self, state: WindowState, t: float) -> ContinualPlan:
        p = self.problem
        decision = window_problem(p.trace, state, p.window_s - t, p.accelerators, p.delta,
                                  p.a_min)
        start = time.perf_counter()
        plan = self.policy(decision, self.rng)
        self.seconds.append(time.perf_counter() - start)
        self.log.append((state.index, t, plan))
        return plan


def _start_jobs(run: _Run, state: WindowState, plan: ContinualPlan) -> dict[str, float]:
    """Start or continue the retrainings the plan gives a share; their rates."""
    rates: dict[str, float] = {}
    for d in plan.decisions:
        if d.retrain is None or d.retrain_share <= EPS or d.stream in state.finished:
            continue
        if d.stream not in state.jobs:
            curve = run.problem.trace.curves[(state.index, d.stream, d.retrain)]
            state.jobs[d.stream] = Retraining(d.retrain, curve.cost_s)
        rates[d.stream] = d.retrain_share
    return rates


def _advance(run: _Run, state: WindowState, rates: dict[str, float], span_s: float,
             ends: dict[str, float], t_next: float) -> None:
    """Run the retrainings for ``span_s``: a completed one deploys its end accuracy; with
    checkpoints served, a running one serves its latest checkpoint (which stands at the
    window's end); with re-estimation, a job past an every-k-th epoch is re-estimated."""
    trace = run.problem.trace
    for s, r in rates.items():
        job = state.jobs[s]
        job.remaining_s -= r * span_s
        curve = trace.curves[(state.index, s, job.config)]
        if ends[s] <= t_next + EPS:
            state.accuracy[s] = curve.final
            state.finished.add(s)
            del state.jobs[s]
            continue
        if run.problem.serve_checkpoints:
            state.accuracy[s] = served_checkpoint(curve, curve.cost_s - job.remaining_s,
                                                  state.accuracy[s])
        if run.reestimate_epochs:
            seen = epochs_done(curve, job) // run.reestimate_epochs * run.reestimate_epochs
            if seen > state.reestimated.get(s, 0):
                state.estimates.reestimate(curve, s, job.config, seen)
                state.reestimated[s] = seen


def _next_event(run: _Run, state: WindowState, t: float, rates: dict[str, float],
                ends: dict[str, float]) -> float:
    """When the policy runs next: a retraining completes (Algorithm 1), a re-estimation
    point is reached (§5), or the window ends."""
    times = [run.problem.window_s, *ends.values()]
    if run.reestimate_epochs:
        for s, r in rates.items():
            curve = run.problem.trace.curves[(state.index, s, state.jobs[s].config)]
            times.append(t + next_reestimate_s(curve, state.jobs[s], r, run.reestimate_epochs))
    return min(times)


def _replay_window(run: _Run, state: WindowState) -> NDArray[np.float64]:
    """One window: decide, run until the next event, re-decide (§4.2)."""
    p = run.problem
    area = {s: 0.0 for s in p.trace.streams}
    t = 0.0
    while t < p.window_s - EPS:
        plan = run.decide(state, t)
        rates = _start_jobs(run, state, plan)
        ends = {s: t + state.jobs[s].remaining_s / r for s, r in rates.items()}
        t_next = _next_event(run, state, t, rates, ends)
        for s, a in served_area(p.trace, state, plan, rates, t_next - t,
                                p.serve_checkpoints).items():
            area[s] += a
        _advance(run, state, rates, t_next - t, ends, t_next)
        t = t_next
    return np.array([area[s] / p.window_s for s in p.trace.streams])


def first_decision(problem: TraceProblem) -> ContinualProblem:
    """The decision problem the policy sees at the start of the first window (the trace's
    initial accuracies, every configuration open, exact profiles)."""
    state = WindowState(0, dict(problem.trace.initial_accuracy), Estimates())
    return window_problem(problem.trace, state, problem.window_s, problem.accelerators,
                          problem.delta, problem.a_min)


def _timings(run: _Run) -> dict[str, float]:
    starts = [s for (_, t, _), s in zip(run.log, run.seconds, strict=True) if t == 0.0]
    return {"decision_seconds_median": float(statistics.median(run.seconds)),
            "decision_seconds_max": float(max(run.seconds)),
            "decision_seconds_total": float(sum(run.seconds)),
            "window_start_decision_seconds_median": float(statistics.median(starts))}


def simulate(problem: TraceProblem, policy: str | Policy, *, seed: int = 0,
             profile_error: float = 0.0, reestimate_epochs: int = 0) -> SimOutcome:
    """Replay ``problem`` under ``policy`` (a registered name or a callable). Each window
    starts with the deployed models (accuracy carried over from the previous window times
    the trace's drift); the policy decides at the window's start and again whenever a
    retraining completes; a retraining unfinished at the window's end is dropped.
    Inference serves the old model until its retraining completes (Figure 4c; Algorithm
    2's EstimateAccuracy), or each epoch's checkpoint with ``problem.serve_checkpoints``.

    ``profile_error`` σ > 0: the policy sees end accuracies perturbed by N(0, σ) (drawn once
    per window, Figure 11b) while the simulation applies the true ones.
    ``reestimate_epochs`` k > 0: §5's "adapting estimates during retraining": every k
    epochs of a running retraining, its end accuracy is re-estimated from the accuracies of
    the epochs so far (the micro-profiler's learning-curve fit) and the policy re-runs (the
    job keeps its configuration). Deterministic for a seed; decision times in ``timings``."""
    if profile_error < 0:
        raise ConfigError(f"must be >= 0, got {profile_error}", field="profile_error")
    if reestimate_epochs < 0:
        raise ConfigError(f"must be >= 0, got {reestimate_epochs}", field="reestimate_epochs")
    chosen = get_policy(policy) if isinstance(policy, str) else policy
    run = _Run(problem, chosen, np.random.default_rng(seed), profile_error, reestimate_epochs)
    trace = problem.trace
    accuracy = dict(trace.initial_accuracy)
    rows = []
    for w in range(problem.n_windows):
        if w > 0:
            accuracy = {s: a * trace.retained.get((w, s), 1.0) for s, a in accuracy.items()}
        state = WindowState(w, accuracy, Estimates.draw(trace, w, profile_error, run.rng))
        rows.append(_replay_window(run, state))
    return SimOutcome(np.array(rows), tuple(run.log), _timings(run))
