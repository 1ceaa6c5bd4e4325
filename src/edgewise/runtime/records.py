"""What a training run reports: one record per epoch, the lost members and the result, and
time to accuracy over the records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from edgewise.runtime.plan import TrainPlan

__all__ = ["EpochRecord", "Interruption", "TrainResult", "time_to_accuracy"]


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """One completed epoch: its validation metric (``val_accuracy``, the workload's metric),
    its time in wall seconds here and in device seconds (wall ÷ the runtime's time
    dilation; equal on emulated clusters), the staleness of the updates it applied (mean
    and max, in server versions), the ids of the samples it trained and, in the sync loop
    with two workers or more, the gradient noise scale measured over its steps."""

    epoch: int
    val_accuracy: float
    wall_seconds: float
    samples_per_second: float
    workers: tuple[str, ...]
    applied_ids: NDArray[np.int64] = field(repr=False)
    worker_stats: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)
    server_seconds: float = 0.0  # the parameter server's time serving async pushes
    device_seconds: float = 0.0
    staleness_mean: float = 0.0
    staleness_max: int = 0
    noise_scale: float | None = None  # the sync loop's B_simple, in samples (runtime.noise_scale)
    validation_seconds: float = 0.0  # the epoch-end evaluation (on a worker), wall seconds
    noise_scale_adam: float | None = None
    """The same of the gradients preconditioned by Adam's step (Pollux's noise scale for Adam;
    None with SGD, or before Adam's fifth step)."""
    reading_device_seconds: float = 0.0
    """Device seconds after the epoch's end until its validation metric was known: its
    evaluation, where it ran beside the next epoch (``TrainConfig.evaluation``); 0 where the
    epoch's own time holds it."""
    learning_rate: float | None = None
    """The rate the server's optimiser stepped with this epoch (schedule, warm-up and the
    global batch's scaling in; the ``async`` treatments scale each push's further)."""


def time_to_accuracy(epochs: Sequence[EpochRecord], target: float) -> float | None:
    """Device seconds of training until the validation metric of an epoch was known to have
    reached ``target``: the device seconds of the epochs up to the first such, and its
    evaluation's where that ran beside the next epoch; None if none did."""
    spent = 0.0
    for r in epochs:
        spent += r.device_seconds
        if r.val_accuracy >= target:
            return spent + r.reading_device_seconds
    return None


@dataclass(frozen=True, slots=True)
class Interruption:
    """A lost worker or device, when it was detected and what followed."""

    device: str
    member: str
    reason: str
    epoch: int
    detected_at: float
    strikes: int


@dataclass(frozen=True, slots=True)
class TrainResult:
    job_id: str
    epochs: tuple[EpochRecord, ...]
    interruptions: tuple[Interruption, ...]
    final_plan: TrainPlan
    strikes: dict[str, int]
    shipped_bytes: dict[str, int]
    transport_bytes: dict[str, dict[str, int]]
    checkpoint: Path | None
    seconds: float
    stopped_early: bool = False

    @property
    def val_accuracy(self) -> float:
        return self.epochs[-1].val_accuracy if self.epochs else float("nan")

    def time_to_accuracy(self, target: float) -> float | None:
        """Device seconds until validation accuracy first reached ``target``, or None."""
        return time_to_accuracy(self.epochs, target)
