"""The edgewise arms of ``bench time-to-accuracy``: a policy plans the update of the Deep-Edge
testbed, the engine trains the plan with one loop while the SIFT apps run, and the arm
reports its accuracy curve over device time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from edgewise.cluster.examples import example_path
from edgewise.runtime.plan import DEFAULT_EVALUATION, Evaluation
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.records import TrainResult
from edgewise.wire.frames import WireChoice

__all__ = ["ArmResult", "TTASetup", "app_misses", "curve_of", "edgewise_arm", "first_at",
           "measured_noise_scale", "noise_on_the_way", "shapes_setup"]


@dataclass(frozen=True, slots=True)
class TTASetup:
    """What every arm trains: the workload file, epochs, seed, target and the optimiser."""

    spec: Path
    epochs: int
    seed: int
    target: float
    learning_rate: float = 0.003
    lr_schedule: Literal["constant", "cosine"] = "cosine"
    wire_dtype: WireChoice = "auto"  # the engine's arms' weights and gradients on the wire
    evaluation: Evaluation = DEFAULT_EVALUATION  # the engine's arms' readings (TrainConfig)
    ps_shards: str = "auto"  # the engine's arms' server: one, or sharded (TrainConfig)
    reference_batch: int = 128
    """The global batch ``learning_rate`` is set for: the DDP arm's, four ranks of 32 (the
    equal plan's batch). The engine's ``sync`` arms and DDP scale the rate from it to their
    own global batch, and a raised rate warms up (``TrainConfig.lr_reference_batch``); the
    one-device arm is a plain loop at ``learning_rate``."""


@dataclass(frozen=True, slots=True)
class ArmResult:
    """One arm's run: validation accuracy after each epoch, at cumulative device seconds."""

    name: str
    accuracies: tuple[float, ...]
    device_seconds: tuple[float, ...]  # cumulative, at each epoch's end
    staleness_mean: float | None = None
    deadline_misses: dict[str, int] | None = None
    extra: dict[str, Any] | None = None
    lags: tuple[float, ...] = ()
    """Device seconds after each epoch's end until its accuracy was known (the engine's
    evaluation beside the next epoch); empty: at the epoch's end."""

    @property
    def final_accuracy(self) -> float | None:
        return self.accuracies[-1] if self.accuracies else None

    @property
    def reading_seconds(self) -> tuple[float, ...]:
        """Device seconds at which each epoch's accuracy was known."""
        if not self.lags:
            return self.device_seconds
        return tuple(t + lag for t, lag in zip(self.device_seconds, self.lags, strict=True))

    def tta(self, target: float) -> float | None:
        """Device seconds until an epoch's accuracy was known to be at or above ``target``;
        None if never."""
        epoch = first_at(self.accuracies, target)
        return None if epoch is None else self.reading_seconds[epoch]

    @property
    def epoch_device_seconds(self) -> float | None:
        """The median epoch's device seconds."""
        if not self.device_seconds:
            return None
        return float(np.median(np.diff((0.0, *self.device_seconds))))


def first_at(accuracies: Sequence[float], target: float) -> int | None:
    """The index of the first epoch at or above ``target``; None if none."""
    return next((i for i, a in enumerate(accuracies) if a >= target), None)


def curve_of(accuracies: list[float], epoch_seconds: list[float]) -> tuple[tuple[float, ...],
                                                                          tuple[float, ...]]:
    """Accuracies and the cumulative seconds at each epoch's end."""
    return tuple(accuracies), tuple(float(t) for t in np.cumsum(epoch_seconds))


def app_misses(apps: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each background app's deadline misses, by app (``update.run``'s statistics)."""
    return {str(a["app"]): int(a["misses"]) for a in apps}


def shapes_setup(root: Path, per_class: int, seed: int) -> Path:
    """The shipped MobileNetV2 ×0.35 spec beside ``per_class`` generated shapes per class."""
    import shutil

    from edgewise.nn.workload.synthetic import make_shapes_folder

    make_shapes_folder(root / "data" / "shapes", per_class=per_class, seed=seed)
    target = root / "shapes-mobilenetv2.yaml"
    shutil.copy(example_path("workloads/shapes-mobilenetv2.yaml"), target)
    return target


def measured_noise_scale(arm: ArmResult) -> float | None:
    """The Adam-preconditioned noise scale an arm measured on its way to the target
    (:func:`noise_on_the_way`); None where it has none."""
    return None if arm.extra is None else arm.extra.get("noise_scale_adam")


def noise_on_the_way(readings: Sequence[float | None], accuracies: Sequence[float],
                     target: float) -> float | None:
    """The median of the epochs' noise-scale readings up to and including the first epoch
    at ``target`` (every epoch's where none reached it); None without a reading there.

    The noise scale grows as the loss falls (McCandlish et al. 2018, §3: their critical
    batch at a loss predicts the batch to reach that loss), so a plan's epochs to a target
    depend on the readings on the way to it, not on the later epochs', where the gradient
    is small and the ratio large (``fair``: 149–683 in the first eight epochs of emulated
    runs, docs/runtime.md; means of 979–4,306 over thirty epochs in the testbed races).
    The median, not the mean: an epoch of eight steps reads one noisy ratio, at times many
    times its neighbours'."""
    reached = first_at(accuracies, target)
    kept = [r for r in readings[: None if reached is None else reached + 1] if r is not None]
    return round(float(np.median(kept)), 1) if kept else None


def step_parts(result: TrainResult, dilation: float) -> dict[str, float]:
    """Where the run's steps went, in device seconds a batch: each worker's computing its
    gradient, encoding its push, waiting for the server's reply (the links both ways, the
    server's queue and service, and in ``sync`` the step's barrier) and loading the reply
    (``runtime.bench.where_time_went``: the mean over workers of each worker's median over
    the epochs after the first), divided by the cluster's time dilation."""
    from edgewise.runtime.bench import where_time_went

    parts = where_time_went(result)["worker_seconds_per_batch"]
    return {k: round(v / dilation, 5) for k, v in parts.items() if v is not None}


def edgewise_arm(runtime: RayRuntime, setup: TTASetup, policy: str, mode: str,
                 staleness: str | None = None, noise_scale: float | None = None) -> ArmResult:
    """Plan with ``policy`` over the runtime's cluster and train ``setup`` with ``mode``
    (and, for ``async``, the staleness treatment ``staleness``; default the engine's);
    ``noise_scale`` is the workload's, for ``deep-edge-goodput``."""
    from edgewise.nn.workload import load_workload, validate
    from edgewise.runtime.plan import TrainConfig
    from edgewise.update.policies import REGISTRY
    from edgewise.update.run import cluster_problem, execute

    workload = load_workload(setup.spec)
    samples = validate(workload, seed=setup.seed).train_samples
    problem = cluster_problem(runtime.cluster, {}, samples, noise_scale=noise_scale)
    plan = REGISTRY.get(policy)(problem, np.random.default_rng(setup.seed))
    extra: dict[str, Any] = {} if staleness is None else {"staleness": staleness}
    extra["ps_shards"] = setup.ps_shards if mode == "sync" else "one"  # shards: sync's alone
    config = TrainConfig(workload=workload, epochs=setup.epochs, seed=setup.seed,
                         mode=mode, learning_rate=setup.learning_rate,  # type: ignore[arg-type]
                         lr_schedule=setup.lr_schedule, worker_memory_mb=1024,
                         lr_reference_batch=setup.reference_batch,
                         wire_dtype=setup.wire_dtype, evaluation=setup.evaluation, **extra)
    done = execute(runtime, problem, plan, config=config)
    records = done.result.epochs
    accs, times = curve_of([r.val_accuracy for r in records],
                           [r.device_seconds for r in records])
    stale = float(np.mean([r.staleness_mean for r in records])) if records else None
    noise = [r.noise_scale_adam for r in records]
    lags = tuple(r.reading_device_seconds for r in records)
    reads = [r.validation_seconds * r.device_seconds / r.wall_seconds for r in records
             if r.wall_seconds > 0]
    return ArmResult(f"{policy}/{mode}", accs, times, stale, app_misses(done.apps),
                     {"shards": dict(done.train_plan.shards),
                      "batch_sizes": dict(done.train_plan.batch_sizes),
                      "noise_scale_adam": noise_on_the_way(noise, accs, setup.target),
                      "planned_noise_scale": noise_scale,
                      "evaluation_device_seconds": round(float(np.median(reads)), 4)
                      if reads else None,
                      "step_device_seconds": step_parts(done.result, runtime.time_dilation)},
                     lags if any(lags) else ())
