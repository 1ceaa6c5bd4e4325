"""The stop rule of a profile sample (issue 24 §6): the 95 % interval of the mean step time
against scipy's t distribution, and scripted step times on a fake clock that stop at the
minimum time, at the target or at the cap."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from edgewise.errors import ConfigError, EdgewiseError
from edgewise.perf.measure import APP_WAIT_S, measure_sample
from edgewise.perf.profiler import ProfileConfig, profile
from edgewise.perf.stability import (
    CI_REL_TARGET,
    MAX_STEP_FACTOR,
    StepStats,
    StopRule,
    ci95_rel_halfwidth,
)
from edgewise.perf.stress import StressPoint

BEFORE = (10.0, 0.0, 20.0)


def _by_hand(times_s: list[float]) -> float:
    n = len(times_s)
    t = scipy_stats.t.ppf(0.975, n - 1)
    return float(t * statistics.stdev(times_s) / math.sqrt(n) / statistics.fmean(times_s))


def test_the_interval_matches_a_hand_computation() -> None:
    times_s = [0.10, 0.12, 0.11, 0.30, 0.09]
    # t(0.975, 4) = 2.77645; s = 0.087920; mean = 0.144: 2.77645 * 0.087920 / sqrt(5) / 0.144
    assert ci95_rel_halfwidth(times_s) == pytest.approx(0.758108, abs=1e-6)
    assert ci95_rel_halfwidth(times_s) == pytest.approx(_by_hand(times_s), rel=1e-12)
    assert ci95_rel_halfwidth([0.25] * 7) == 0.0


def test_too_few_steps_or_a_zero_mean_have_no_interval() -> None:
    assert ci95_rel_halfwidth([]) == math.inf
    assert ci95_rel_halfwidth([0.2]) == math.inf
    assert ci95_rel_halfwidth([0.0, 0.0, 0.0]) == math.inf
    assert StepStats().ci95_rel == math.inf


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-4, 10.0), min_size=2, max_size=60), st.floats(0.01, 100.0))
def test_the_running_interval_is_scipys_and_has_no_unit(times_s: list[float],
                                                        scale: float) -> None:
    width = ci95_rel_halfwidth(times_s)
    assert width >= 0.0
    assert width == pytest.approx(_by_hand(times_s), rel=1e-6, abs=1e-9)
    assert ci95_rel_halfwidth([scale * t for t in times_s]) == pytest.approx(width, rel=1e-6,
                                                                             abs=1e-9)


def test_the_rule_waits_for_the_minimum_then_the_target_or_the_cap() -> None:
    rule = StopRule(min_s=1.0, max_s=4.0)
    steady = StepStats(5, 0.2, 0.0)
    noisy = StepStats(5, 0.2, 0.2)  # s = 0.22: far above 5 %
    assert not rule.done(0.99, steady)  # before the minimum time
    assert not rule.done(2.0, StepStats(2, 0.2, 0.0))  # fewer than 3 steps
    assert rule.done(1.0, steady)
    assert not rule.done(3.99, noisy)
    assert rule.done(4.0, noisy)


def test_a_bad_target_or_cap_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as target:
        StopRule(1.0, 4.0, ci_rel_target=0.0)
    assert target.value.field == "ci_rel_target"
    with pytest.raises(ConfigError) as cap:
        ProfileConfig((StressPoint(),), step_s=2.0, max_step_s=1.0).stop_rule  # noqa: B018
    assert cap.value.field == "max_step_s"
    config = ProfileConfig((StressPoint(),), ci_rel_target=-0.1)
    with pytest.raises(EdgewiseError, match="ci_rel_target"):
        profile(tmp_path / "x.csv", config)
    assert not (tmp_path / "x.csv").exists()


def test_the_default_cap_is_a_multiple_of_the_minimum() -> None:
    rule = ProfileConfig((StressPoint(),), step_s=1.5).stop_rule
    assert (rule.min_s, rule.max_s, rule.ci_rel_target) == (1.5, MAX_STEP_FACTOR * 1.5,
                                                            CI_REL_TARGET)
    assert ProfileConfig((StressPoint(),), step_s=1.5, max_step_s=2.0).stop_rule.max_s == 2.0


class _Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class _ScriptedTrainer:
    """Steps whose times (seconds) come from a script, 3/4 compute and 1/4 update, each
    advancing the fake clock by its time; two warm-up steps first, as the profiler takes."""

    def __init__(self, clock: _Clock, pattern: Iterable[float]) -> None:
        self.clock = clock
        self.script: Iterator[float] = itertools.chain([1.0, 1.0], itertools.cycle(pattern))
        self.timed: list[float] = []

    def step(self, batch: int) -> tuple[float, float]:
        step_s = next(self.script)
        self.clock.now_s += step_s
        self.timed.append(step_s)
        return 0.75 * step_s, 0.25 * step_s


class _SilentApp:
    """A co-located app whose periods never end (none is recorded)."""

    def exec_ms_between(self, t0: float, t1: float) -> list[float]:
        return []


def _measured(pattern: list[float], rule: StopRule,
              app: _SilentApp | None = None) -> tuple[dict[str, float], list[float]]:
    clock = _Clock()
    trainer = _ScriptedTrainer(clock, pattern)
    values = measure_sample(trainer, 8, rule, app, BEFORE, clock=clock)  # type: ignore[arg-type]
    return values, trainer.timed[2:]


def _first_stop(pattern: list[float], rule: StopRule) -> int:
    """Brute force: the fewest steps after which the rule holds, by the batch formula."""
    times_s = list(itertools.islice(itertools.cycle(pattern), 100_000))
    for n in range(1, len(times_s)):
        elapsed_s = sum(times_s[:n])
        if elapsed_s >= rule.min_s and n >= rule.min_steps and (
                elapsed_s >= rule.max_s or ci95_rel_halfwidth(times_s[:n]) <= rule.ci_rel_target):
            return n
    raise AssertionError("never stops")


def test_steady_steps_stop_at_the_minimum_time() -> None:
    rule = StopRule(min_s=1.0, max_s=4.0)
    values, timed = _measured([0.125], rule)
    assert len(timed) == 8 == values["steps"]  # 8 x 0.125 s = step_s
    assert values["step_time_ci95_rel"] == 0.0
    assert values["compute_s_per_sample"] == pytest.approx(0.75 * 0.125 / 8)
    assert values["update_s"] == pytest.approx(0.25 * 0.125)
    assert values["cpu"] == BEFORE[0] and math.isnan(values["app_exec_ms"])


def test_noisy_steps_train_past_the_minimum_until_the_target() -> None:
    rule = StopRule(min_s=1.0, max_s=200.0)
    pattern = [0.0625, 0.1875, 0.125, 0.125]  # mean 0.125 s, CV 0.35
    values, timed = _measured(pattern, rule)
    assert len(timed) == values["steps"] == _first_stop(pattern, rule)
    assert sum(timed) > 2 * rule.min_s and sum(timed) < rule.max_s
    assert values["step_time_ci95_rel"] <= CI_REL_TARGET
    assert values["step_time_ci95_rel"] == pytest.approx(ci95_rel_halfwidth(timed), rel=1e-9)
    assert ci95_rel_halfwidth(timed[:-1]) > CI_REL_TARGET  # it stopped at the first chance


def test_steps_that_never_settle_stop_at_the_cap_and_say_so() -> None:
    rule = StopRule(min_s=1.0, max_s=4.0)
    throttled = [0.03125, 0.03125, 0.03125, 0.03125, 0.375]  # a CPU quota's period waited out
    values, timed = _measured(throttled, rule)
    assert sum(timed) >= rule.max_s and sum(timed[:-1]) < rule.max_s
    assert values["steps"] == len(timed) == _first_stop(throttled, rule)
    assert values["step_time_ci95_rel"] > CI_REL_TARGET
    assert values["step_time_ci95_rel"] == pytest.approx(ci95_rel_halfwidth(timed), rel=1e-9)


def test_a_sample_still_waits_for_the_apps_period_up_to_its_limit() -> None:
    rule = StopRule(min_s=1.0, max_s=4.0)
    values, timed = _measured([0.125], rule, _SilentApp())
    assert sum(timed) == pytest.approx(rule.min_s + APP_WAIT_S)  # steady, yet waited
    assert values["step_time_ci95_rel"] == 0.0 and math.isnan(values["app_exec_ms"])
