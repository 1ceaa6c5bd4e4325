"""One window of Ekya's trace replay: the decision problems a policy sees, the retrainings it
starts, and the inference accuracy they yield over time (used by ``sim.simulate``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from edgewise.continual.curves import fit_learning_curve
from edgewise.continual.estimate import EPS, inference_factor
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
)
from edgewise.continual.profiles import Curve, Trace

__all__ = [
    "Estimates", "Retraining", "WindowState", "checkpoint_area", "epochs_done",
    "inference_options", "next_reestimate_s", "served_area", "served_checkpoint",
    "window_problem",
]  # fmt: skip


def inference_options(trace: Trace, stream: str) -> tuple[InferenceOption, ...]:
    """Λ of a stream: one option per subsampling rate of ``inference.csv``; its demand is the
    rate times the stream's full-rate demand."""
    return tuple(InferenceOption(f"s{rate:g}", factor, rate * trace.demand[stream])
                 for rate, factor in zip(trace.subsampling, trace.inference_factor[stream],
                                         strict=True) if rate > 0)


@dataclass(slots=True)
class Retraining:
    """A stream's retraining in the current window: its config, the compute it still needs."""

    config: str
    remaining_s: float


@dataclass(slots=True)
class Estimates:
    """What the policy is told about each (stream, config) of a window: the end accuracy
    (the trace's, plus the micro-profiler's error ``offset``, or a re-estimate made during
    retraining, §5) and the earlier epochs' checkpoints (shifted by the same error)."""

    offset: dict[tuple[str, str], float] = field(default_factory=dict)
    end: dict[tuple[str, str], float] = field(default_factory=dict)
    _unstarted: dict[tuple[str, str], RetrainOption] = field(default_factory=dict, repr=False)

    @classmethod
    def draw(cls, trace: Trace, window: int, sigma: float,
             rng: np.random.Generator) -> Estimates:
        """Profiles with N(0, σ) accuracy errors, drawn once per window (Figure 11b)."""
        out = cls()
        if sigma > 0:
            for s in trace.streams:
                for c in trace.configs:
                    final = trace.curves[(window, s, c)].final
                    noisy = float(np.clip(final + rng.normal(0.0, sigma), 0.0, 1.0))
                    out.offset[(s, c)], out.end[(s, c)] = noisy - final, noisy
        return out

    def option(self, curve: Curve, stream: str, config: str,
               remaining_s: float | None = None) -> RetrainOption:
        """The option of ``config`` with ``remaining_s`` of its compute left (all of it when
        None): end accuracy, remaining cost and the checkpoints still ahead."""
        if remaining_s is None:  # asked at every decision: made once per window
            key = (stream, config)
            if key not in self._unstarted:
                self._unstarted[key] = self._option(curve, stream, config, curve.cost_s)
            return self._unstarted[key]
        return self._option(curve, stream, config, remaining_s)

    def _option(self, curve: Curve, stream: str, config: str, left: float) -> RetrainOption:
        done, shift = curve.cost_s - left, self.offset.get((stream, config), 0.0)
        ahead = tuple((c - done, min(1.0, max(0.0, a + shift)))
                      for c, a in zip(curve.compute_s[1:-1], curve.accuracy[1:-1], strict=True)
                      if done + EPS < c < curve.cost_s - EPS)
        return RetrainOption(config, self.end.get((stream, config), curve.final),
                             max(left, EPS), ahead if left > EPS else ())

    def reestimate(self, curve: Curve, stream: str, config: str, epochs_seen: int) -> None:
        """§5, "adapting estimates during retraining": fit the learning curve to the
        accuracies of the epochs seen so far and take its value at the last epoch."""
        epochs = len(curve.compute_s) - 1
        fit = fit_learning_curve(list(range(epochs_seen + 1)), curve.accuracy[:epochs_seen + 1])
        self.end[(stream, config)] = fit.accuracy(epochs)
        self._unstarted.pop((stream, config), None)


@dataclass(slots=True)
class WindowState:
    """A window being replayed: model accuracy per stream, running and finished
    retrainings, the policy's estimates and the epochs at which each job was re-estimated."""

    index: int
    accuracy: dict[str, float]
    estimates: Estimates
    jobs: dict[str, Retraining] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    reestimated: dict[str, int] = field(default_factory=dict)


def window_problem(trace: Trace, state: WindowState, remaining_s: float, accelerators: float,
                   delta: float, a_min: float) -> ContinualProblem:
    """The decision problem at a point of the window: a stream that finished retraining has
    no option, a running retraining keeps its config with its remaining cost (§5: "leaves
    the configuration ... unchanged"), the others may pick any profiled configuration."""
    states = []
    for s in trace.streams:
        retrain: tuple[RetrainOption, ...] = ()
        if s in state.jobs:
            job = state.jobs[s]
            curve = trace.curves[(state.index, s, job.config)]
            retrain = (state.estimates.option(curve, s, job.config, job.remaining_s),)
        elif s not in state.finished:
            retrain = tuple(state.estimates.option(trace.curves[(state.index, s, c)], s, c)
                            for c in trace.configs)
        states.append(StreamState(s, state.accuracy[s], retrain, inference_options(trace, s)))
    return ContinualProblem(tuple(states), accelerators, remaining_s, delta, a_min)


def served_checkpoint(curve: Curve, done_s: float, deployed: float) -> float:
    """The accuracy of the latest checkpoint after ``done_s`` compute (one per logged epoch
    of ``curve``); the deployed model's before the first epoch ends."""
    k = int(np.searchsorted(np.asarray(curve.compute_s), done_s + EPS, side="right")) - 1
    return deployed if k <= 0 else curve.accuracy[k]


def checkpoint_area(curve: Curve, remaining_s: float, rate: float, span_s: float,
                    deployed: float) -> float:
    """The model accuracy integrated over ``span_s`` seconds while the retraining runs at
    ``rate`` from ``remaining_s`` compute left, each epoch's checkpoint served as it ends."""
    done = curve.cost_s - remaining_s
    cuts = [0.0, *((c - done) / rate for c in curve.compute_s
                   if done + EPS < c < done + rate * span_s), span_s]
    return sum(served_checkpoint(curve, done + rate * a, deployed) * (b - a)
               for a, b in pairwise(cuts))


def served_area(trace: Trace, state: WindowState, plan: ContinualPlan,
                rates: dict[str, float], span_s: float,
                serve_checkpoints: bool) -> dict[str, float]:
    """Per stream, inference accuracy integrated over the next ``span_s`` seconds:
    model accuracy × λ's factor at the planned share (frames it cannot analyse dropped)."""
    options = {s: {o.config: o for o in inference_options(trace, s)} for s in trace.streams}
    area = {}
    for d in plan.decisions:
        factor = inference_factor(options[d.stream][d.inference], d.inference_share)
        served = state.accuracy[d.stream] * span_s
        if serve_checkpoints and d.stream in rates:
            job = state.jobs[d.stream]
            served = checkpoint_area(trace.curves[(state.index, d.stream, job.config)],
                                     job.remaining_s, rates[d.stream], span_s,
                                     state.accuracy[d.stream])
        area[d.stream] = served * factor
    return area


def next_reestimate_s(curve: Curve, job: Retraining, rate: float, every: int) -> float:
    """Seconds until the running job writes its next every-``every``-th epoch checkpoint
    before its last epoch (inf when none is left)."""
    done = curve.cost_s - job.remaining_s
    epochs = len(curve.compute_s) - 1
    ahead = [curve.compute_s[j] for j in range(every, epochs, every)
             if curve.compute_s[j] > done + EPS]
    return (ahead[0] - done) / rate if ahead else float("inf")


def epochs_done(curve: Curve, job: Retraining) -> int:
    """How many epochs of the job's curve its spent compute has completed."""
    done = curve.cost_s - job.remaining_s
    return int(np.searchsorted(np.asarray(curve.compute_s), done + EPS, side="right")) - 1
