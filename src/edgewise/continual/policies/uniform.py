"""The uniform baseline of §3.2 and §6.1: a fixed retraining configuration and a static split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgewise.continual.estimate import estimate_accuracy, inference_factor, pick_inference
from edgewise.continual.policies import Policy, register
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    RetrainOption,
    StreamDecision,
    StreamState,
)
from edgewise.errors import ConfigError

__all__ = ["pareto_configs", "uniform", "uniform_plan", "uniform_policy"]


def pareto_configs(profiles: Sequence[Sequence[RetrainOption]]) -> tuple[str, str]:
    """Config 1 ("high") and Config 2 ("low") of §6.1 from hold-out profiles (one option list
    per hold-out stream and window). Each configuration is scored by its mean accuracy and
    mean cost; on the Pareto front of (cost ↓, accuracy ↑), Config 1 is the most accurate
    point and Config 2 the cheapest point that keeps at least half of Config 1's accuracy
    gain over the cheapest front point."""
    acc: dict[str, list[float]] = {}
    cost: dict[str, list[float]] = {}
    for options in profiles:
        for o in options:
            acc.setdefault(o.config, []).append(o.accuracy)
            cost.setdefault(o.config, []).append(o.cost_s)
    if not acc:
        raise ConfigError("no retraining profile to pick from", field="profiles")
    points = {c: (float(np.mean(cost[c])), float(np.mean(acc[c]))) for c in acc}
    front = sorted((c for c, (k, a) in points.items()
                    if not any(k2 <= k and a2 >= a and (k2, a2) != (k, a)
                               for k2, a2 in points.values())),
                   key=lambda c: points[c][0])
    high = max(front, key=lambda c: points[c][1])
    floor = points[front[0]][1]
    target = floor + 0.5 * (points[high][1] - floor)
    low = next(c for c in front if points[c][1] >= target - 1e-12)
    return high, low


def _fixed_option(stream: StreamState, config: str | None) -> RetrainOption | None:
    if not stream.retrain:
        return None
    if len(stream.retrain) == 1 or config is None:  # a running job, or "most accurate"
        return (stream.retrain[0] if len(stream.retrain) == 1
                else max(stream.retrain, key=lambda o: o.accuracy))
    return next((o for o in stream.retrain if o.config == config), None)


def uniform_plan(problem: ContinualProblem, config: str | None,
                 inference_fraction: float) -> ContinualPlan:
    """Every stream gets G/N; ``inference_fraction`` of it serves inference, the rest retrains
    with ``config`` (None: each stream's most accurate one, as in §3.2), whether or not it
    finishes in the window. The split stays static after a retraining ends. Inference uses
    the most accurate λ that keeps up (the baseline has no a_MIN floor)."""
    if not 0.0 < inference_fraction <= 1.0:
        raise ConfigError(f"must be in (0, 1], got {inference_fraction}",
                          field="inference_fraction")
    share = problem.accelerators / len(problem.streams)
    infer_share, retrain_share = inference_fraction * share, (1 - inference_fraction) * share
    decisions, total, violations = [], 0.0, 0
    for s in problem.streams:
        option = _fixed_option(s, config)
        lam, _ = pick_inference(s, infer_share, 0.0)
        factor = inference_factor(lam, infer_share)
        est = estimate_accuracy(s.accuracy, option, factor, retrain_share, problem.window_s)
        value = s.accuracy * factor if est is None else est
        decisions.append(StreamDecision(s.name, None if option is None else option.config,
                                        lam.config, retrain_share, infer_share))
        total += value
        violations += int(s.accuracy * factor < problem.a_min - 1e-9)
    return ContinualPlan(tuple(decisions), total / len(decisions), violations)


def uniform_policy(config: str | None, inference_fraction: float) -> Policy:
    """A uniform baseline with a fixed configuration and split, as a registry-shaped policy."""

    def policy(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
        return uniform_plan(problem, config, inference_fraction)

    return policy


@register("uniform")
def uniform(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
    """§3.2's uniform scheduler: even split between streams and, within a stream, between
    inference and retraining; the most accurate retraining configuration."""
    return uniform_plan(problem, None, 0.5)
