"""The Profiler (Deep-Edge §IV-B1, §IV-C1): the model-update task measured under stress points
with the SIFT app co-located, one row of ``schema.PROFILE_COLUMNS`` per sample, each trained
until its mean step time is known within a target (``perf.stability``), resumable."""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgewise.errors import EdgewiseError
from edgewise.nn.workload import Workload
from edgewise.perf.app_process import start_background_app
from edgewise.perf.measure import State, measure_sample, state_now
from edgewise.perf.profile_file import Sample, append_sample, read_samples
from edgewise.perf.schema import PROFILE_COLUMNS
from edgewise.perf.stability import CI_REL_TARGET, MAX_STEP_FACTOR, StopRule, preload
from edgewise.perf.step_trainer import StepTrainer, Update
from edgewise.perf.stress import Stressor, StressPoint, stress_grid, stress_ng_path
from edgewise.wire.frames import WireDtype

__all__ = ["Measurer", "PointProfiler", "ProfileConfig", "ProfileResult", "Sample",
           "default_config", "profile", "quick_config", "sample_key"]

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """What to profile: the stress ``grid``, ``batch_sizes``, ``repeats`` of each, at least
    ``step_s`` seconds of training per sample, and on until the 95 % confidence interval of
    its mean step time is within ``ci_rel_target`` of the mean (issue 24 §6: "within 5 %"),
    for at most ``max_step_s`` (default ``MAX_STEP_FACTOR`` × ``step_s``), see
    :mod:`edgewise.perf.stability`; ``settle_s`` after starting a stressor (plus 1 s per
    2 GB it must fill), the co-located app and its period. ``time_dilation`` is how much
    slower than the device the machine runs (a testbed's common factor): rows record device
    time (measured times ÷ it) and the app's period is stretched by it."""

    grid: tuple[StressPoint, ...]
    batch_sizes: tuple[int, ...] = (8, 16, 32, 64)
    repeats: int = 1
    step_s: float = 2.0
    ci_rel_target: float = CI_REL_TARGET
    max_step_s: float | None = None  # None: MAX_STEP_FACTOR x step_s
    settle_s: float = 1.0
    device_type: str = "host-x86"
    app_kind: str = "sift"
    app_period_ms: float = 200.0
    seed: int = 0
    time_dilation: float = 1.0
    workload: Workload | None = None  # resolved; None: DigitsCNN on digits
    wire_dtype: WireDtype = "bfloat16"  # what the pushes and replies travel as: the run's
    # (the default sync loop's; runtime.plan.TrainConfig.wire)

    @property
    def stop_rule(self) -> StopRule:
        """When each sample stops training (raises ConfigError for a bad target or cap)."""
        cap_s = MAX_STEP_FACTOR * self.step_s if self.max_step_s is None else self.max_step_s
        return StopRule(self.step_s, cap_s, self.ci_rel_target)


def default_config(device_type: str = "host-x86", repeats: int = 1) -> ProfileConfig:
    """4 CPU levels x 3 memory levels x no I/O x 4 batch sizes, 2 to 8 s each (~3 min
    where every sample's mean step time settles in 2 s, ~8 min where none does)."""
    return ProfileConfig(tuple(stress_grid()), repeats=repeats, device_type=device_type)


def quick_config(device_type: str = "host-x86", repeats: int = 1) -> ProfileConfig:
    """3 CPU levels x 2 memory levels x 2 batch sizes, 0.8 to 3.2 s each (well
    under a minute where the mean step times settle in 0.8 s, about one where none does)."""
    grid = stress_grid((0, 50, 100), (0, 512), (0,))
    return ProfileConfig(tuple(grid), batch_sizes=(16, 64), repeats=repeats, step_s=0.8,
                         settle_s=0.5, device_type=device_type)


def sample_key(point: StressPoint, batch_size: int, repeat: int) -> str:
    """The resume key of a sample: its stress point, batch size and repeat index."""
    return f"{point.key}/b={batch_size}/r={repeat}"


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """The profile file, rows written now, grid samples skipped as already recorded, every
    sample in the file, and the target the new samples' step-time intervals were held to."""

    path: Path
    written: int
    skipped: int
    samples: tuple[Sample, ...]
    ci_rel_target: float = CI_REL_TARGET




def _pending(config: ProfileConfig, done: set[str]) -> list[tuple[StressPoint, int, int]]:
    return [(p, b, r) for p in config.grid for r in range(config.repeats)
            for b in config.batch_sizes if sample_key(p, b, r) not in done]


Measurer = Callable[[StressPoint, list[tuple[int, int]], Callable[[Sample], None]], list[Sample]]
"""Measures one stress point's (batch, repeat) samples somewhere, calling back with each."""


def profile(output: Path, config: ProfileConfig, progress: ProgressFn | None = None,
            measurer: Measurer | None = None) -> ProfileResult:
    """Profile the model-update task on this host (or where ``measurer`` measures, e.g. a
    testbed device) under every stress point of the grid with the background app running,
    appending one row per sample to ``output`` (CSV, columns ``schema.PROFILE_COLUMNS``: the
    model's columns, then the steps and the step time's interval each sample reached);
    samples already recorded there are skipped.

    Raises
    ------
    EdgewiseError
        stress-ng missing, an unusable existing file, or an invalid configuration.
    """
    if config.repeats < 1 or not config.batch_sizes or min(config.batch_sizes) < 1:
        raise EdgewiseError("repeats and batch sizes must be positive")
    rule = config.stop_rule  # a bad target or cap fails before anything is measured
    samples = read_samples(output, config.device_type)
    todo = _pending(config, {s.key for s in samples})
    skipped = len(config.grid) * len(config.batch_sizes) * config.repeats - len(todo)
    if any(not p.idle for p, _, _ in todo):
        stress_ng_path()  # fail before measuring anything
    if todo:
        output.parent.mkdir(parents=True, exist_ok=True)
        samples += _run(output, config, todo, progress, measurer)
    elif progress:
        progress(0, 0, "all recorded")
    return ProfileResult(output, len(todo), skipped, tuple(samples), rule.ci_rel_target)


def _row(config: ProfileConfig, host: str, batch: int, values: dict[str, float],
         n_workers: int = 1) -> dict[str, str | float | int]:
    """A full row in schema order: every one of ``n_workers`` workers at ``batch``."""
    row: dict[str, str | float | int] = {
        "device_type": config.device_type, "host": host, "batch_size": batch,
        "n_workers": n_workers, "batch_mean": batch,
        "app_kind": config.app_kind, **values}
    return {c: row[c] for c in PROFILE_COLUMNS}


class PointProfiler:
    """Measures grid samples in this process (its machine: the host, or the device a cgroup
    holds it to): the trainer and the co-located app (none when ``config.app_kind`` is
    empty) live across stress points; each point runs under its stressor. ``update`` sends
    each step's gradients to a parameter server elsewhere (default: a local update);
    ``ps_state`` is that server's state."""

    def __init__(self, config: ProfileConfig, update: Update | None = None,
                 ps_state: State | None = None) -> None:
        self.config, self.ps_state = config, ps_state
        self.trainer = StepTrainer(config.seed, update, config.workload)
        preload()  # the stop rule's t quantile, not imported inside a sample's window
        self.host = platform.node()
        self.app = start_background_app(
            config.app_kind, config.app_period_ms * config.time_dilation,
            seed=config.seed) if config.app_kind else None
        self._stop_load = threading.Event()
        self._load_batch = 1

    def point(self, point: StressPoint, items: list[tuple[int, int]],
              on_sample: Callable[[Sample], None] | None = None, *, n_workers: int = 1,
              on_batch: Callable[[int], None] | None = None) -> list[Sample]:
        """The samples ``items`` ((batch, repeat) pairs) at stress ``point``, recorded as
        measured among ``n_workers`` workers, every one at the sample's batch (``on_batch``
        is told each batch before its sample, so that companion workers train at it)."""
        config = self.config
        rule = config.stop_rule
        budget = config.settle_s + len(items) * (rule.max_s + 5.0) + 60.0
        out: list[Sample] = []
        with Stressor.at(point, timeout_s=budget * config.time_dilation):
            time.sleep(config.settle_s + point.memory_mb / 2048)
            before = state_now(self._state_window_s())
            for batch, repeat in items:
                if on_batch is not None:
                    on_batch(batch)
                values = measure_sample(self.trainer, batch, rule, self.app, before,
                                        config.time_dilation, self.ps_state)
                out.append(Sample(sample_key(point, batch, repeat), _row(
                    config, self.host, batch, values, n_workers)))
                if on_sample is not None:
                    on_sample(out[-1])
        return out

    def _state_window_s(self) -> float:
        """How long the state before training is averaged: two periods of the app (so that
        its load counts whatever the phase), at least a quarter second of device time."""
        config = self.config
        periods = 2 * config.app_period_ms / 1000 if self.app is not None else 0.0
        return max(periods, 0.25) * config.time_dilation

    def load(self, seconds: float, batch: int) -> int:
        """Train at ``batch`` (or the batch :meth:`follow` set since) for ``seconds`` or
        until :meth:`stop_load` (a companion worker loading the parameter server while
        another device is measured); steps."""
        self._stop_load.clear()
        self._load_batch = batch
        steps, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stop_load.is_set():
            self.trainer.step(self._load_batch)
            steps += 1
        return steps

    def follow(self, batch: int) -> None:
        """Train the running :meth:`load` at ``batch`` from its next step on."""
        self._load_batch = batch

    def stop_load(self) -> None:
        self._stop_load.set()

    def close(self) -> None:
        if self.app is not None:
            self.app.stop()


def _run(output: Path, config: ProfileConfig, todo: list[tuple[StressPoint, int, int]],
         progress: ProgressFn | None, measurer: Measurer | None) -> list[Sample]:
    """Measure the pending samples, grouped by stress point; the new samples."""
    written: list[Sample] = []
    keys = [sample_key(p, b, r) for p, b, r in todo]

    def record(sample: Sample) -> None:  # progress names the sample measured next
        written.append(sample)
        append_sample(output, sample)
        if progress and len(written) < len(todo):
            progress(len(written), len(todo), keys[len(written)])

    if progress:
        progress(0, len(todo), keys[0])
    local = PointProfiler(config) if measurer is None else None
    measure: Measurer = local.point if local is not None else measurer  # type: ignore[assignment]
    try:
        for point in dict.fromkeys(p for p, _, _ in todo):
            measure(point, [(b, r) for p, b, r in todo if p == point], record)
    finally:
        if local is not None:
            local.close()
    if progress:
        progress(len(written), len(todo), "done")
    return written
