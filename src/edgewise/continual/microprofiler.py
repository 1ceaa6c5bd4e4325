"""Ekya's micro-profiler (§4.3): few epochs on a small sample, a fitted learning curve, and
the per-epoch compute time at a whole accelerator, scaled linearly.

The learning-curve model and its NNLS fit live in ``edgewise.continual.curves`` (the
simulator's re-estimation during retraining uses them too).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.curves import LearningCurve, fit_learning_curve
from edgewise.continual.problem import RetrainConfig, RetrainOption
from edgewise.errors import ConfigError
from edgewise.nn.continual_models import Student, accuracy, golden_label, retrain
from edgewise.nn.streams import Window

__all__ = [
    "LearningCurve", "MicroProfile", "MicroProfilerSettings", "ProfileHistory",
    "ProfiledConfig", "WindowData", "exhaustive_profile", "fit_learning_curve",
    "microprofile", "pareto_gap", "prepare_window",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class WindowData:
    """A window's retraining frames with golden labels, split into training and validation
    (the validation accuracy is what the profiler and the scheduler see)."""

    train_x: NDArray[np.float32]
    train_y: NDArray[np.int64]
    val_x: NDArray[np.float32]
    val_y: NDArray[np.int64]


def prepare_window(window: Window, golden: object, val_fraction: float = 0.25,
                   seed: int = 0) -> WindowData:
    """Label the window's retraining frames with the golden model and hold some out."""
    from torch import nn

    if not isinstance(golden, nn.Module):
        raise ConfigError("golden must be a torch module", field="golden")
    labels = golden_label(golden, window.train_x)
    order = np.random.default_rng([seed, window.index, 13]).permutation(len(labels))
    n_val = max(1, round(val_fraction * len(labels)))
    val, tr = order[:n_val], order[n_val:]
    return WindowData(window.train_x[tr], labels[tr], window.train_x[val], labels[val])


@dataclass(frozen=True, slots=True)
class MicroProfilerSettings:
    """Sample ``subset_fraction`` of the window's training frames (at least ``min_subset``),
    train ``micro_epochs`` epochs; ``stretch`` turns host CPU seconds into accelerator seconds
    of the emulated device; configurations more than ``prune_margin`` below the Pareto front
    in each of the last ``history`` windows are not profiled again."""

    subset_fraction: float = 0.1
    min_subset: int = 24
    micro_epochs: int = 5
    stretch: float = 1.0
    prune_margin: float = 0.05
    history: int = 2


@dataclass(frozen=True, slots=True)
class ProfiledConfig:
    """One configuration's estimates: accuracy after full retraining and its cost in
    accelerator-seconds at a whole accelerator (per-epoch time × epochs)."""

    config: RetrainConfig
    curve: LearningCurve
    observed: tuple[float, ...]
    accuracy: float
    epoch_s: float

    @property
    def cost_s(self) -> float:
        return self.epoch_s * self.config.epochs

    def option(self) -> RetrainOption:
        """The scheduler's view: end accuracy, cost, and each earlier epoch's checkpoint on
        the fitted curve (what checkpoint-aware planning counts, §5)."""
        epoch_s = max(self.epoch_s, 1e-6 / self.config.epochs)
        checkpoints = tuple((k * epoch_s, self.curve.accuracy(k))
                            for k in range(1, self.config.epochs))
        return RetrainOption(self.config.name, self.accuracy, epoch_s * self.config.epochs,
                             checkpoints)


@dataclass(frozen=True, slots=True)
class MicroProfile:
    """A stream-window's profile: the configurations profiled (pruned ones left out), the
    deployed model's validation accuracy and the compute the profiling itself used."""

    configs: tuple[ProfiledConfig, ...]
    model_accuracy: float
    profiling_s: float
    pruned: tuple[str, ...] = ()

    def options(self) -> tuple[RetrainOption, ...]:
        return tuple(p.option() for p in self.configs)


def _n_train(config: RetrainConfig, n_frames: int) -> int:
    return max(1, round(config.data_fraction * n_frames))


def _profile_one(model: Student, data: WindowData, config: RetrainConfig, base_acc: float,
                 settings: MicroProfilerSettings, rng: np.random.Generator) -> ProfiledConfig:
    """§4.3: train on the sample, record accuracy per epoch, fit, extrapolate."""
    n_full = _n_train(config, len(data.train_y))
    n_sub = min(n_full, max(settings.min_subset,
                            round(settings.subset_fraction * len(data.train_y))))
    idx = rng.choice(len(data.train_y), size=n_sub, replace=False)
    observed: list[float] = []
    epoch_cpu: list[float] = []
    clock = [time.thread_time()]

    def record(epoch: int, student: Student) -> None:
        epoch_cpu.append(time.thread_time() - clock[0])
        observed.append(accuracy(student, data.val_x, data.val_y))
        clock[0] = time.thread_time()

    retrain(model, data.train_x[idx], data.train_y[idx], epochs=settings.micro_epochs,
            batch_size=config.batch_size, neurons=config.last_layer_neurons,
            frozen_layers=config.layers_frozen, seed=int(rng.integers(1 << 30)),
            on_epoch=record)
    xs = [0.0] + [k * n_sub / n_full for k in range(1, settings.micro_epochs + 1)]
    curve = fit_learning_curve(xs, [base_acc, *observed])
    # the median epoch: the first one also pays one-off costs (optimiser state, caches)
    epoch_s = float(np.median(epoch_cpu)) / n_sub * n_full * settings.stretch
    return ProfiledConfig(config, curve, tuple(observed), curve.accuracy(config.epochs),
                          epoch_s)


def pareto_gap(points: dict[str, tuple[float, float]]) -> dict[str, float]:
    """For each (cost, accuracy) point: how far its accuracy is below the best accuracy of
    any point that costs no more (0 on the resource-accuracy Pareto front, Figure 3b)."""
    return {name: max(0.0, max(a2 for c2, a2 in points.values() if c2 <= c) - a)
            for name, (c, a) in points.items()}


@dataclass(slots=True)
class ProfileHistory:
    """Per stream, each past window's Pareto gaps; prunes configurations that were far from
    the front in every one of the last ``history`` windows (§4.3, "using history")."""

    gaps: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def record(self, stream: str, profile: MicroProfile) -> None:
        points = {p.config.name: (p.cost_s, p.accuracy) for p in profile.configs}
        self.gaps.setdefault(stream, []).append(pareto_gap(points))

    def promising(self, stream: str, configs: Sequence[RetrainConfig],
                  settings: MicroProfilerSettings) -> list[RetrainConfig]:
        past = self.gaps.get(stream, [])[-settings.history:]
        if len(past) < settings.history:
            return list(configs)
        keep = [c for c in configs
                if any(g.get(c.name, 0.0) <= settings.prune_margin for g in past)]
        return keep or list(configs)


def microprofile(model: Student, data: WindowData, configs: Sequence[RetrainConfig], *,
                 settings: MicroProfilerSettings | None = None,
                 history: ProfileHistory | None = None, stream: str = "",
                 seed: int = 0) -> MicroProfile:
    """Micro-profile the promising ``configs`` for one stream's window (§4.3)."""
    settings = settings or MicroProfilerSettings()
    if not configs:
        raise ConfigError("no retraining configuration to profile", field="configs")
    chosen = history.promising(stream, configs, settings) if history else list(configs)
    rng = np.random.default_rng(seed)
    start = time.thread_time()
    base = accuracy(model, data.val_x, data.val_y)
    profiled = tuple(_profile_one(model, data, c, base, settings, rng) for c in chosen)
    spent = (time.thread_time() - start) * settings.stretch
    names = {c.name for c in chosen}
    profile = MicroProfile(profiled, base, spent,
                           tuple(c.name for c in configs if c.name not in names))
    if history is not None:
        history.record(stream, profile)
    return profile


def exhaustive_profile(model: Student, data: WindowData, configs: Sequence[RetrainConfig],
                       *, stretch: float = 1.0, seed: int = 0,
                       ) -> tuple[dict[str, float], float]:
    """Actually retrain every configuration on all its data for all its epochs: the true
    accuracy per configuration and the compute this took (the exhaustive profiler's cost)."""
    rng = np.random.default_rng([seed, 17])
    start = time.thread_time()
    actual: dict[str, float] = {}
    for c in configs:
        idx = rng.permutation(len(data.train_y))[: _n_train(c, len(data.train_y))]
        student = retrain(model, data.train_x[idx], data.train_y[idx], epochs=c.epochs,
                          batch_size=c.batch_size, neurons=c.last_layer_neurons,
                          frozen_layers=c.layers_frozen, seed=int(rng.integers(1 << 30)))
        actual[c.name] = accuracy(student, data.val_x, data.val_y)
    return actual, (time.thread_time() - start) * stretch
