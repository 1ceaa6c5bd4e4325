"""Ekya's trace-driven simulator (§6.1): replays profile traces under a scheduling policy."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.estimate import EPS, inference_factor
from edgewise.continual.policies import Policy
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
)
from edgewise.continual.profiles import Curve, Trace
from edgewise.errors import ConfigError

__all__ = ["SimResult", "inference_options", "simulate", "window_problem"]


@dataclass(frozen=True, slots=True)
class SimResult:
    """Per-window, per-stream inference accuracy averaged over each window, the plans made
    (one per decision point) and the wall-clock seconds each decision took."""

    accuracy: NDArray[np.float64]  # shape (windows, streams)
    plans: tuple[tuple[int, float, ContinualPlan], ...] = field(repr=False)
    decision_s: tuple[float, ...] = field(repr=False)

    @property
    def mean_accuracy(self) -> float:
        return float(self.accuracy.mean())


def inference_options(trace: Trace, stream: str) -> tuple[InferenceOption, ...]:
    """Λ of a stream: one option per subsampling rate of ``inference.csv``; its demand is the
    rate times the stream's full-rate demand."""
    return tuple(InferenceOption(f"s{rate:g}", factor, rate * trace.demand[stream])
                 for rate, factor in zip(trace.subsampling, trace.inference_factor[stream],
                                         strict=True) if rate > 0)


@dataclass(slots=True)
class _Job:
    """A stream's retraining in the current window: its config, the compute it still needs."""

    config: str
    remaining_s: float


def window_problem(trace: Trace, window: int, accuracy: dict[str, float],
                   jobs: dict[str, _Job], finished: set[str], remaining_s: float,
                   accelerators: float, delta: float, a_min: float,
                   profiled: Mapping[tuple[str, str], float] | None = None) -> ContinualProblem:
    """The decision problem at a point of ``window``: streams that finished retraining have
    no option, a running retraining keeps its config with its remaining cost (§5: "leaves
    the configuration ... unchanged"), the others may pick any profiled configuration.
    ``profiled`` replaces the trace's end accuracies with estimates (stream, config)."""
    states = []

    def est(s: str, c: str) -> float:
        true = trace.curves[(window, s, c)].final
        return true if profiled is None else profiled.get((s, c), true)

    for s in trace.streams:
        retrain: tuple[RetrainOption, ...] = ()
        if s in jobs:
            job = jobs[s]
            retrain = (RetrainOption(job.config, est(s, job.config),
                                     max(job.remaining_s, EPS)),)
        elif s not in finished:
            retrain = tuple(RetrainOption(c, est(s, c), trace.curves[(window, s, c)].cost_s)
                            for c in trace.configs)
        states.append(StreamState(s, accuracy[s], retrain, inference_options(trace, s)))
    return ContinualProblem(tuple(states), accelerators, remaining_s, delta, a_min)


@dataclass(frozen=True, slots=True)
class _Setup:
    trace: Trace
    policy: Policy
    accelerators: float
    window_s: float
    delta: float
    a_min: float
    profile_error: float = 0.0
    checkpoints: bool = False


def _start_jobs(setup: _Setup, w: int, plan: ContinualPlan, jobs: dict[str, _Job],
                finished: set[str]) -> dict[str, float]:
    """Start or continue the retrainings the plan gives a share; their rates."""
    rates: dict[str, float] = {}
    for d in plan.decisions:
        if d.retrain is None or d.retrain_share <= EPS or d.stream in finished:
            continue
        if d.stream not in jobs:
            jobs[d.stream] = _Job(d.retrain, setup.trace.curves[(w, d.stream, d.retrain)].cost_s)
        rates[d.stream] = d.retrain_share
    return rates


def _advance(setup: _Setup, w: int, rates: dict[str, float], span_s: float,
             ends: dict[str, float], t_next: float, jobs: dict[str, _Job], finished: set[str],
             accuracy: dict[str, float]) -> None:
    """Run the retrainings for ``span_s``: a completed one deploys its end accuracy; with
    checkpoints, a running one serves its latest checkpoint (which stands at the window's
    end)."""
    for s, r in rates.items():
        jobs[s].remaining_s -= r * span_s
        curve = setup.trace.curves[(w, s, jobs[s].config)]
        if ends[s] <= t_next + EPS:
            accuracy[s] = curve.final
            finished.add(s)
            del jobs[s]
        elif setup.checkpoints:
            accuracy[s] = _checkpoint(curve, curve.cost_s - jobs[s].remaining_s, accuracy[s])


def _run_window(setup: _Setup, w: int, accuracy: dict[str, float], rng: np.random.Generator,
                log: list[tuple[int, float, ContinualPlan]],
                times: list[float]) -> NDArray[np.float64]:
    """One window: decide, run until the next retraining completes, re-decide (§4.2)."""
    trace, window_s = setup.trace, setup.window_s
    jobs: dict[str, _Job] = {}
    finished: set[str] = set()
    profiled = None
    if setup.profile_error > 0:  # the micro-profiler's estimates, drawn once per window
        profiled = {(s, c): float(np.clip(trace.curves[(w, s, c)].final
                                          + rng.normal(0.0, setup.profile_error), 0.0, 1.0))
                    for s in trace.streams for c in trace.configs}
    area = {s: 0.0 for s in trace.streams}
    t = 0.0
    while t < window_s - EPS:
        problem = window_problem(trace, w, accuracy, jobs, finished, window_s - t,
                                 setup.accelerators, setup.delta, setup.a_min, profiled)
        start = time.perf_counter()
        plan = setup.policy(problem, rng)
        times.append(time.perf_counter() - start)
        log.append((w, t, plan))
        rates = _start_jobs(setup, w, plan, jobs, finished)
        ends = {s: t + jobs[s].remaining_s / r for s, r in rates.items()}
        t_next = min([window_s, *ends.values()])
        options = {s.name: {o.config: o for o in s.inference} for s in problem.streams}
        for d in plan.decisions:
            factor = inference_factor(options[d.stream][d.inference], d.inference_share)
            served = accuracy[d.stream] * (t_next - t)
            if setup.checkpoints and d.stream in rates:
                served = _checkpoint_area(trace.curves[(w, d.stream, jobs[d.stream].config)],
                                          jobs[d.stream].remaining_s, rates[d.stream],
                                          t_next - t, accuracy[d.stream])
            area[d.stream] += served * factor
        _advance(setup, w, rates, t_next - t, ends, t_next, jobs, finished, accuracy)
        t = t_next
    return np.array([area[s] / window_s for s in trace.streams])


def _checkpoint(curve: Curve, done_s: float, deployed: float) -> float:
    """The accuracy of the latest checkpoint after ``done_s`` compute (one per logged epoch
    of ``curve``); the deployed model's before the first epoch ends."""
    k = int(np.searchsorted(np.asarray(curve.compute_s), done_s + EPS, side="right")) - 1
    return deployed if k <= 0 else curve.accuracy[k]


def _checkpoint_area(curve: Curve, remaining_s: float, rate: float, span_s: float,
                     deployed: float) -> float:
    """The model accuracy integrated over ``span_s`` seconds while the retraining runs at
    ``rate`` from ``remaining_s`` compute left, each epoch's checkpoint served as it ends."""
    done = curve.cost_s - remaining_s
    cuts = [0.0, *((c - done) / rate for c in curve.compute_s
                   if done + EPS < c < done + rate * span_s), span_s]
    return sum(_checkpoint(curve, done + rate * a, deployed) * (b - a)
               for a, b in pairwise(cuts))


def simulate(trace: Trace, policy: Policy, *, accelerators: float, window_s: float = 200.0,
             delta: float = 0.1, a_min: float = 0.0, seed: int = 0,
             windows: int | None = None, profile_error: float = 0.0,
             checkpoints: bool = False) -> SimResult:
    """Replay ``trace`` under ``policy``: each window starts with the deployed models
    (accuracy carried over from the previous window times the trace's drift), the policy
    decides at the window's start and again whenever a retraining completes; a retraining
    unfinished at the window's end is dropped. Inference serves the old model until its
    retraining completes (Figure 4c; Algorithm 2's EstimateAccuracy). With ``checkpoints``
    (§4.2: "Ekya periodically checkpoints the model (§5) so that inference can get the
    up-to-date accuracy from retraining"; off by default) inference serves each epoch's
    checkpoint, the accuracy the trace logs at that compute time, for every policy, and an
    unfinished retraining's last checkpoint stands. With ``profile_error`` σ > 0 the policy
    sees end accuracies perturbed by N(0, σ) (drawn once per window, Figure 11b) while the
    simulation applies the true ones. Deterministic for a given seed."""
    if profile_error < 0:
        raise ConfigError(f"must be >= 0, got {profile_error}", field="profile_error")
    n = trace.windows if windows is None else windows
    if not 1 <= n <= trace.windows:
        raise ConfigError(f"must be in [1, {trace.windows}], got {n}", field="windows")
    rng = np.random.default_rng(seed)
    setup = _Setup(trace, policy, accelerators, window_s, delta, a_min, profile_error,
                   checkpoints)
    accuracy = dict(trace.initial_accuracy)
    rows: list[NDArray[np.float64]] = []
    log: list[tuple[int, float, ContinualPlan]] = []
    times: list[float] = []
    for w in range(n):
        if w > 0:
            accuracy = {s: a * trace.retained.get((w, s), 1.0) for s, a in accuracy.items()}
        rows.append(_run_window(setup, w, accuracy, rng, log, times))
    return SimResult(np.array(rows), tuple(log), tuple(times))
