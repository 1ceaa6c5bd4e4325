"""The Profiler (Deep-Edge §IV-B1, §IV-C1): the model-update task measured under stress points
with the SIFT app co-located, one row of ``schema.COLUMNS`` per sample, resumable."""

from __future__ import annotations

import csv
import math
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from edgewise.errors import EdgewiseError
from edgewise.nn.data import digits_split
from edgewise.nn.models import DigitsCNN, make_optimizer
from edgewise.perf.app_process import BackgroundApp, start_background_app
from edgewise.perf.metrics import sample_metrics
from edgewise.perf.schema import COLUMNS
from edgewise.perf.stress import Stressor, StressPoint, stress_grid, stress_ng_path
from edgewise.wire.state import decode_state_dict, encode_state_dict

__all__ = ["ProfileConfig", "ProfileResult", "Sample", "default_config", "profile",
           "quick_config", "sample_key"]

ProgressFn = Callable[[int, int, str], None]
State = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """What to profile: the stress ``grid``, ``batch_sizes``, ``repeats`` of each, ``step_s``
    seconds of training per sample, ``settle_s`` after starting a stressor (plus 1 s per
    2 GB it must fill), the co-located app and its period."""

    grid: tuple[StressPoint, ...]
    batch_sizes: tuple[int, ...] = (8, 16, 32, 64)
    repeats: int = 1
    step_s: float = 2.0
    settle_s: float = 1.0
    device_type: str = "host-x86"
    app_kind: str = "sift"
    app_period_ms: float = 200.0
    seed: int = 0


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
class Sample:
    """One profile row and where in the grid it was measured."""

    key: str
    row: dict[str, str | float | int] = field(hash=False)

    @property
    def point(self) -> str:
        return self.key.rsplit("/", 2)[0]


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """The profile file, rows written now, grid samples skipped as already recorded, and
    every sample in the file."""

    path: Path
    written: int
    skipped: int
    samples: tuple[Sample, ...]


class _Trainer:
    """DigitsCNN training steps on digits, one thread: forward + backward timed as compute;
    push + update + pull timed as gradients encoded and decoded with the project transport,
    an Adam step, then the weights encoded and decoded and loaded (the update is local, so
    the parameter server is this host and no network is crossed)."""

    def __init__(self, seed: int) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        train, _ = digits_split(seed=seed)
        self.x, self.y = torch.from_numpy(train.x), torch.from_numpy(train.y)
        self.model: nn.Module = DigitsCNN()
        self.opt = make_optimizer("adam", self.model, 0.003)
        self.rng = np.random.default_rng(seed)

    def step(self, batch: int) -> tuple[float, float]:
        """One step; (compute seconds, update seconds)."""
        idx = torch.from_numpy(self.rng.choice(len(self.y), size=batch, replace=False))
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx])
        loss.backward()  # type: ignore[no-untyped-call]
        t1 = time.perf_counter()
        params = dict(self.model.named_parameters())
        grads = {n: p.grad for n, p in params.items() if p.grad is not None}
        pushed = decode_state_dict(encode_state_dict(grads))
        for name, grad in pushed.items():
            params[name].grad = grad
        self.opt.step()
        pulled = decode_state_dict(
            encode_state_dict(self.model.state_dict()))
        self.model.load_state_dict(pulled)
        return t1 - t0, time.perf_counter() - t1


def _state(metrics: dict[str, float]) -> State:
    return (metrics["cpu_percent"], metrics.get("accelerator_percent", 0.0),
            metrics["memory_percent"])


def _state_now(interval_s: float = 0.25) -> State:
    """The node state (cpu, gpu, mem %), CPU averaged over ``interval_s``."""
    sample_metrics()  # primes psutil's CPU counter
    time.sleep(interval_s)
    return _state(sample_metrics())


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


def _measure(trainer: _Trainer, batch: int, step_s: float,
             app: BackgroundApp | None) -> dict[str, float]:
    """One sample's measured values (all but the identifying columns)."""
    before = _state_now()
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
    return {"cpu": before[0], "gpu": before[1], "mem": before[2],
            "ps_cpu": before[0], "ps_gpu": before[1], "ps_mem": before[2],
            "compute_s_per_sample": statistics.median(computes) / batch,
            "update_s": statistics.median(updates),
            "new_cpu": float(new[0]), "new_gpu": float(new[1]), "new_mem": float(new[2]),
            "app_exec_ms": float(np.percentile(execs, 95)) if execs else math.nan}


def _keys_path(path: Path) -> Path:
    return path.with_name(path.name + ".keys")


def _read_existing(path: Path, device_type: str) -> list[Sample]:
    """The samples already in ``path`` (with keys from its ``.keys`` side file)."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise EdgewiseError(f"{path}: not a profile (its columns differ from the schema)")
        rows = list(reader)
    keys_file = _keys_path(path)
    keys = keys_file.read_text().split() if keys_file.exists() else []
    if len(keys) < len(rows):
        raise EdgewiseError(f"{path}: cannot resume, {keys_file} lists {len(keys)} keys for "
                            f"{len(rows)} rows; move the profile away to start afresh")
    if any(r["device_type"] != device_type for r in rows):
        raise EdgewiseError(f"{path}: holds rows of another device type than {device_type!r}")
    return [Sample(k, dict(r)) for k, r in zip(keys, rows, strict=False)]


def _append(path: Path, sample: Sample) -> None:
    """Append one row and its key, creating the file with its header when new."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(sample.row)
    with _keys_path(path).open("a") as fh:
        fh.write(sample.key + "\n")


def _pending(config: ProfileConfig, done: set[str]) -> list[tuple[StressPoint, int, int]]:
    return [(p, b, r) for p in config.grid for r in range(config.repeats)
            for b in config.batch_sizes if sample_key(p, b, r) not in done]


def profile(output: Path, config: ProfileConfig,
            progress: ProgressFn | None = None) -> ProfileResult:
    """Profile the model-update task on this host under every stress point of the grid with
    the background app running, appending one row per sample to ``output`` (CSV, columns
    ``schema.COLUMNS``); samples already recorded there are skipped.

    Raises
    ------
    EdgewiseError
        stress-ng missing, an unusable existing file, or an invalid configuration.
    """
    if config.repeats < 1 or not config.batch_sizes or min(config.batch_sizes) < 1:
        raise EdgewiseError("repeats and batch sizes must be positive")
    samples = _read_existing(output, config.device_type)
    todo = _pending(config, {s.key for s in samples})
    skipped = len(config.grid) * len(config.batch_sizes) * config.repeats - len(todo)
    if any(not p.idle for p, _, _ in todo):
        stress_ng_path()  # fail before measuring anything
    if todo:
        output.parent.mkdir(parents=True, exist_ok=True)
        samples += _run(output, config, todo, progress)
    elif progress:
        progress(0, 0, "all recorded")
    return ProfileResult(output, len(todo), skipped, tuple(samples))


def _row(config: ProfileConfig, host: str, batch: int,
         values: dict[str, float]) -> dict[str, str | float | int]:
    """A full row in schema order: one local worker, so ``batch_mean`` is the batch."""
    row: dict[str, str | float | int] = {
        "device_type": config.device_type, "host": host, "batch_size": batch, "n_workers": 1,
        "batch_mean": batch, "app_kind": config.app_kind, **values}
    return {c: row[c] for c in COLUMNS}


def _run(output: Path, config: ProfileConfig, todo: list[tuple[StressPoint, int, int]],
         progress: ProgressFn | None) -> list[Sample]:
    """Measure the pending samples, grouped by stress point; the new samples."""
    trainer, host = _Trainer(config.seed), platform.node()
    written: list[Sample] = []
    with start_background_app(config.app_kind, config.app_period_ms, seed=config.seed) as app:
        for point in dict.fromkeys(p for p, _, _ in todo):
            items = [(b, r) for p, b, r in todo if p == point]
            budget = config.settle_s + len(items) * (config.step_s + 5.0) + 60.0
            with Stressor.at(point, timeout_s=budget):
                time.sleep(config.settle_s + point.memory_mb / 2048)
                for batch, repeat in items:
                    key = sample_key(point, batch, repeat)
                    if progress:
                        progress(len(written), len(todo), key)
                    values = _measure(trainer, batch, config.step_s, app)
                    written.append(Sample(key, _row(config, host, batch, values)))
                    _append(output, written[-1])
    if progress:
        progress(len(written), len(todo), "done")
    return written
