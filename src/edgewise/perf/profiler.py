"""The Profiler (Deep-Edge §IV-B1, §IV-C1): the model-update task measured under stress points
with the SIFT app co-located, one row of ``schema.COLUMNS`` per sample, resumable."""

from __future__ import annotations

import math
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgewise.errors import EdgewiseError
from edgewise.nn.workload import Workload
from edgewise.perf.app_process import BackgroundApp, start_background_app
from edgewise.perf.metrics import sample_metrics, without_self
from edgewise.perf.profile_file import Sample, append_sample, read_samples
from edgewise.perf.schema import COLUMNS
from edgewise.perf.step_trainer import StepTrainer, Update
from edgewise.perf.stress import Stressor, StressPoint, stress_grid, stress_ng_path

__all__ = ["Measurer", "PointProfiler", "ProfileConfig", "ProfileResult", "Sample",
           "default_config", "profile", "quick_config", "sample_key"]

ProgressFn = Callable[[int, int, str], None]
State = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """What to profile: the stress ``grid``, ``batch_sizes``, ``repeats`` of each, ``step_s``
    seconds of training per sample, ``settle_s`` after starting a stressor (plus 1 s per
    2 GB it must fill), the co-located app and its period. ``time_dilation`` is how much
    slower than the device the machine runs (a testbed's common factor): rows record device
    time (measured times ÷ it) and the app's period is stretched by it."""

    grid: tuple[StressPoint, ...]
    batch_sizes: tuple[int, ...] = (8, 16, 32, 64)
    repeats: int = 1
    step_s: float = 2.0
    settle_s: float = 1.0
    device_type: str = "host-x86"
    app_kind: str = "sift"
    app_period_ms: float = 200.0
    seed: int = 0
    time_dilation: float = 1.0
    workload: Workload | None = None  # resolved; None: DigitsCNN on digits


def default_config(device_type: str = "host-x86", repeats: int = 1) -> ProfileConfig:
    """4 CPU levels x 3 memory levels x no I/O x 4 batch sizes, 2 s each (~3 min)."""
    return ProfileConfig(tuple(stress_grid()), repeats=repeats, device_type=device_type)


def quick_config(device_type: str = "host-x86", repeats: int = 1) -> ProfileConfig:
    """3 CPU levels x 2 memory levels x 2 batch sizes, 0.8 s each (well under a minute)."""
    grid = stress_grid((0, 50, 100), (0, 512), (0,))
    return ProfileConfig(tuple(grid), batch_sizes=(16, 64), repeats=repeats, step_s=0.8,
                         settle_s=0.5, device_type=device_type)


def sample_key(point: StressPoint, batch_size: int, repeat: int) -> str:
    """The resume key of a sample: its stress point, batch size and repeat index."""
    return f"{point.key}/b={batch_size}/r={repeat}"


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """The profile file, rows written now, grid samples skipped as already recorded, and
    every sample in the file."""

    path: Path
    written: int
    skipped: int
    samples: tuple[Sample, ...]


def _state(metrics: dict[str, float]) -> State:
    return (metrics["cpu_percent"], metrics.get("accelerator_percent", 0.0),
            metrics["memory_percent"])


def _state_now(interval_s: float = 0.25) -> State:
    """The node state (cpu, gpu, mem %) before the update runs, CPU averaged over
    ``interval_s``, memory without this process's (``metrics.without_self``)."""
    sample_metrics()  # primes psutil's CPU counter
    time.sleep(interval_s)
    return _state(without_self(sample_metrics()))


@contextmanager
def _sampled(period_s: float = 0.05) -> Iterator[list[State]]:
    """Node states sampled every ``period_s`` in a thread while the block runs."""
    states: list[State] = []
    stop = threading.Event()

    def loop() -> None:
        sample_metrics()
        while not stop.wait(period_s):
            states.append(_state(sample_metrics()))

    thread = threading.Thread(target=loop, name="profile-sampler", daemon=True)
    thread.start()
    try:
        yield states
    finally:
        stop.set()
        thread.join()


APP_WAIT_S = 30.0  # longest a sample trains on waiting for the app to finish a period


def _keep_training(t0: float, step_s: float, steps: int, app: BackgroundApp | None) -> bool:
    """Train on until ``step_s`` passed and 3 steps ran, and until the app has finished a
    period released during the sample (its records arrive after each period ends; on a
    loaded host a 0.3 s sample may see none), for at most APP_WAIT_S more."""
    elapsed = time.monotonic() - t0
    if elapsed < step_s or steps < 3:
        return True
    return app is not None and not app.exec_ms_between(t0, time.monotonic()) \
        and elapsed < step_s + APP_WAIT_S


def _measure(trainer: StepTrainer, batch: int, step_s: float, app: BackgroundApp | None,
             before: State, dilation: float = 1.0,
             ps_state: State | None = None) -> dict[str, float]:
    """One sample's measured values (all but the identifying columns) from the state
    ``before`` training, times in device time (÷ ``dilation``); the server's state is
    ``ps_state`` (default: this machine's)."""
    for _ in range(2):  # warm-up at this batch size, not timed
        trainer.step(batch)
    computes: list[float] = []
    updates: list[float] = []
    t0 = time.monotonic()
    with _sampled() as states:
        while _keep_training(t0, step_s, len(computes), app):
            compute_s, update_s = trainer.step(batch)
            computes.append(compute_s)
            updates.append(update_s)
    t1 = time.monotonic()
    new = np.percentile(np.array(states or [before]), 95, axis=0)
    execs = app.exec_ms_between(t0, t1) if app else []
    ps = before if ps_state is None else ps_state
    return {"cpu": before[0], "gpu": before[1], "mem": before[2],
            "ps_cpu": ps[0], "ps_gpu": ps[1], "ps_mem": ps[2],
            # means, not medians: an epoch takes the sum of its steps, and under a CPU quota
            # most steps run unthrottled while a few wait out the period (a median saw
            # only the fast ones, and learned compute-time models erred 150-280 %)
            "compute_s_per_sample": statistics.fmean(computes) / batch / dilation,
            "update_s": statistics.fmean(updates) / dilation,
            "new_cpu": float(new[0]), "new_gpu": float(new[1]), "new_mem": float(new[2]),
            "app_exec_ms": float(np.percentile(execs, 95)) / dilation if execs else math.nan}


def _pending(config: ProfileConfig, done: set[str]) -> list[tuple[StressPoint, int, int]]:
    return [(p, b, r) for p in config.grid for r in range(config.repeats)
            for b in config.batch_sizes if sample_key(p, b, r) not in done]


Measurer = Callable[[StressPoint, list[tuple[int, int]], Callable[[Sample], None]], list[Sample]]
"""Measures one stress point's (batch, repeat) samples somewhere, calling back with each."""


def profile(output: Path, config: ProfileConfig, progress: ProgressFn | None = None,
            measurer: Measurer | None = None) -> ProfileResult:
    """Profile the model-update task on this host (or where ``measurer`` measures, e.g. a
    testbed device) under every stress point of the grid with the background app running,
    appending one row per sample to ``output`` (CSV, columns ``schema.COLUMNS``); samples
    already recorded there are skipped.

    Raises
    ------
    EdgewiseError
        stress-ng missing, an unusable existing file, or an invalid configuration.
    """
    if config.repeats < 1 or not config.batch_sizes or min(config.batch_sizes) < 1:
        raise EdgewiseError("repeats and batch sizes must be positive")
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
    return ProfileResult(output, len(todo), skipped, tuple(samples))


def _row(config: ProfileConfig, host: str, batch: int, values: dict[str, float],
         n_workers: int = 1) -> dict[str, str | float | int]:
    """A full row in schema order: every one of ``n_workers`` workers at ``batch``."""
    row: dict[str, str | float | int] = {
        "device_type": config.device_type, "host": host, "batch_size": batch,
        "n_workers": n_workers, "batch_mean": batch,
        "app_kind": config.app_kind, **values}
    return {c: row[c] for c in COLUMNS}


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
        budget = config.settle_s + len(items) * (config.step_s + 5.0) + 60.0
        out: list[Sample] = []
        with Stressor.at(point, timeout_s=budget * config.time_dilation):
            time.sleep(config.settle_s + point.memory_mb / 2048)
            before = _state_now(self._state_window_s())
            for batch, repeat in items:
                if on_batch is not None:
                    on_batch(batch)
                values = _measure(self.trainer, batch, config.step_s, self.app, before,
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
