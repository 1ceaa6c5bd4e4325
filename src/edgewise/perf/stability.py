"""When a profile sample has trained long enough: the 95 % confidence interval of its mean
step time and the rule that stops it once that interval is narrow (issue 24 §6: "profile
each point until [...] the confidence interval of the mean step time is within 5 %")."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from edgewise.errors import ConfigError

__all__ = ["CI_REL_TARGET", "MAX_STEP_FACTOR", "MIN_STEPS", "StepStats", "StopRule",
           "ci95_rel_halfwidth", "preload"]

CI_REL_TARGET = 0.05
"""Default target of the interval's half-width relative to the mean (issue 24 §6: 5 %)."""

MAX_STEP_FACTOR = 4.0
"""Default cap of a sample's training, in multiples of its minimum ``step_s``: the
half-width falls as 1/√steps, so four times the steps halve it, and a sample whose interval
is within twice the target at ``step_s`` still reaches the target by the cap."""

MIN_STEPS = 3


def _t975(dof: int) -> float:
    """Student's t quantile 0.975 with ``dof`` degrees of freedom: what
    ``scipy.stats.t.ppf(0.975, dof)`` evaluates, called directly (microseconds per call
    where ``t.ppf`` takes a tenth of a millisecond; it runs between training steps), imported
    on first use (edgewise's CLI imports this module)."""
    from scipy.special import stdtrit

    return float(stdtrit(dof, 0.975))


def preload() -> None:
    """Import the t quantile now (a third of a second, longer under a CPU quota) rather than
    inside the first sample's training window."""
    _t975(1)


@dataclass(frozen=True, slots=True)
class StepStats:
    """Running count, mean and sum of squared deviations of step times (Welford's update:
    constant cost per step, however many steps a sample takes)."""

    n: int = 0
    mean_s: float = 0.0
    m2_s2: float = 0.0

    def add(self, step_s: float) -> StepStats:
        n = self.n + 1
        delta_s = step_s - self.mean_s
        mean_s = self.mean_s + delta_s / n
        return StepStats(n, mean_s, self.m2_s2 + delta_s * (step_s - mean_s))

    @property
    def ci95_rel(self) -> float:
        """Half-width of the 95 % confidence interval of the mean ÷ the mean:
        t(0.975, n − 1) · s / √n / mean; inf for fewer than 2 steps or a zero mean."""
        if self.n < 2 or self.mean_s == 0:
            return math.inf
        sd_s = math.sqrt(max(self.m2_s2, 0.0) / (self.n - 1))
        return _t975(self.n - 1) * sd_s / math.sqrt(self.n) / abs(self.mean_s)


def ci95_rel_halfwidth(step_times_s: Iterable[float]) -> float:
    """The relative half-width of the 95 % confidence interval of the mean of
    ``step_times_s`` (seconds, one per step): t(0.975, n − 1) · s / √n / mean, with s the
    sample standard deviation; inf for fewer than 2 steps or a zero mean.

    Examples
    --------
    >>> round(ci95_rel_halfwidth([1.0, 2.0, 3.0]), 4)  # 4.3027 · 1 / √3 / 2
    1.2421
    """
    stats = StepStats()
    for step_s in step_times_s:
        stats = stats.add(step_s)
    return stats.ci95_rel


@dataclass(frozen=True, slots=True)
class StopRule:
    """When a sample stops training: not before ``min_s`` seconds and ``min_steps`` steps;
    then once the 95 % interval of its mean step time is within ``ci_rel_target`` of the
    mean, or at ``max_s`` seconds whatever the interval (a device that never settles still
    finishes; its row reports the interval it reached)."""

    min_s: float
    max_s: float
    ci_rel_target: float = CI_REL_TARGET
    min_steps: int = MIN_STEPS

    def __post_init__(self) -> None:
        if not self.ci_rel_target > 0:
            raise ConfigError(f"must be > 0, got {self.ci_rel_target}", field="ci_rel_target")
        if not self.max_s >= self.min_s:
            raise ConfigError(f"must be at least step_s ({self.min_s} s), got {self.max_s}",
                              field="max_step_s")

    def done(self, elapsed_s: float, stats: StepStats) -> bool:
        """Whether a sample that has trained ``elapsed_s`` seconds, its steps ``stats``, may
        stop (the interval is computed only once the minimum time and steps are met)."""
        if elapsed_s < self.min_s or stats.n < self.min_steps:
            return False
        return elapsed_s >= self.max_s or stats.ci95_rel <= self.ci_rel_target
