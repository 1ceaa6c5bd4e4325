"""Load-balanced synchronous steps (LB-BSP, Chen et al., SoCC 2020), pure.

A plan gives each worker a shard ``d_i`` and a batch ``b_i``. Synchronous SGD with those as
they are makes ``ceil(d_i / b_i)`` steps per worker: unequal, so a worker whose shard runs
out leaves the epoch while the others go on, and the fast device waits at every barrier it
could have filled. Balanced, every worker makes the same ``S`` steps per epoch, each worker's
batch is its shard's share, ``d_i / S`` (the shard split into ``S`` nearly equal parts), and
the server averages the gradients weighted by samples. ``S`` keeps the plan's global batch:
``S = round(sum d_i / sum b_i)``, at least 1 and at most the smallest shard.

The global batch therefore moves from ``sum b_i`` to ``sum d_i / S``; the learning rate
follows it from the global batch it was set for (the reference: the run's
``lr_reference_batch``, else the plan's own ``sum b_i``): linearly for SGD (Goyal et al.
2017), by the square root for Adam (Malladi et al., "On the SDEs and scaling rules for
adaptive gradient algorithms", NeurIPS 2022). A rate raised above the reference's warms up
from the reference's (Goyal et al.'s gradual warm-up) over :data:`WARMUP_FRACTION` of the
run's epochs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.nn.models import Warmup

__all__ = ["WARMUP_FRACTION", "BalancedSteps", "balanced_steps", "batch_warmup", "epoch_batches",
           "lr_scale"]

WARMUP_FRACTION = 5 / 90
"""The share of a run's epochs that a raised learning rate warms up over: Goyal et al.
(2017) warmed up over 5 of ImageNet's 90 epochs (1.7 of a 30-epoch run)."""


@dataclass(frozen=True, slots=True)
class BalancedSteps:
    """Steps per epoch, each worker's (largest) batch, and the learning-rate factor from
    the reference global batch (``reference_batch``)."""

    steps: int
    batch_sizes: Mapping[str, int]
    planned_global_batch: int
    global_batch: float
    lr_factor: float
    reference_batch: float


def lr_scale(optimizer: str, planned: float, actual: float) -> float:
    """The learning-rate factor when the global batch goes from ``planned`` to ``actual``:
    ``actual / planned`` for SGD, its square root for Adam."""
    if planned <= 0 or actual <= 0:
        return 1.0
    ratio = actual / planned
    return ratio if optimizer == "sgd" else float(np.sqrt(ratio))


def batch_warmup(lr_factor: float, epochs: int) -> Warmup:
    """The warm-up of a rate ``lr_factor`` times the reference's: from the reference's rate
    over :data:`WARMUP_FRACTION` of ``epochs`` when the factor raised it, else none."""
    if lr_factor <= 1.0:
        return Warmup()
    return Warmup(epochs * WARMUP_FRACTION, 1.0 / lr_factor)


def balanced_steps(shards: Mapping[str, int], batch_sizes: Mapping[str, int],
                   optimizer: str = "adam", reference_batch: float = 0) -> BalancedSteps:
    """The balanced form of a plan's shards and batches (only workers with a shard), its
    learning-rate factor from ``reference_batch`` (0: the plan's global batch)."""
    workers = [w for w, d in shards.items() if d > 0]
    if not workers:
        raise ValueError("no worker has a shard")
    total = sum(shards[w] for w in workers)
    planned = sum(batch_sizes[w] for w in workers)
    steps = int(min(max(1, round(total / max(planned, 1))), min(shards[w] for w in workers)))
    batches = {w: -(-shards[w] // steps) for w in workers}
    reference = reference_batch if reference_batch > 0 else planned
    return BalancedSteps(steps, batches, planned, total / steps,
                         lr_scale(optimizer, reference, total / steps), reference)


def epoch_batches(order: NDArray[np.int64], batch: int, steps: int = 0) -> list[NDArray[np.int64]]:
    """An epoch's batches of the shuffled shard ``order``: ``steps`` nearly equal parts when
    ``steps > 0`` (balanced), else consecutive batches of ``batch``."""
    if steps > 0:
        return [part for part in np.array_split(order, steps) if len(part)]
    return [order[i : i + batch] for i in range(0, len(order), max(batch, 1))]
