"""A parameter server split into shards, one on each of several devices (no Ray here).

One server takes every worker's whole push and sends every worker the whole model back:
on the Deep-Edge testbed all of a synchronous step's bytes cross the Raspberry Pi's one
1 GbE port, four workers' 0.8 MB pushes in and as many replies out, at least 51 device ms a
step (docs/workloads.md, "Where an engine step goes"). The parameter server of Li et al.
(OSDI 2014) partitions its keys over several servers; BytePS (Jiang et al., OSDI 2020) runs
a server on every worker machine. ``TrainConfig.ps_shards`` ``"workers"`` does both: the
flat parameters are cut into contiguous ranges, one server holds each, on each worker's
device, and each worker sends each server its range of the gradients and reads back that
range of the weights. Each port then carries about ``2 × (n-1)/n`` of one model's bytes a
step, whatever the number ``n`` of workers, and the range on the worker's own device
crosses no link.

Every optimiser this engine uses is element-wise (Adam, SGD with momentum), and a
synchronous step's mean, its BatchNorm buffers and its wire narrowing are too, so the
shards together take exactly the steps one server takes: ``tests/runtime/test_shards.py``
compares their weights bit for bit. What is not element-wise is pooled here: the gradient
noise scale's squared norms (summed over the shards' ranges step by step,
:func:`pooled_noise`) and the checkpoint (the ranges put together into one server's
checkpoint, ``pscheckpoint.merge_checkpoints``, which any number of shards restores from).

The ranges' bounds are multiples of :data:`~edgewise.runtime.narrowing.BLOCK`, so that an
``int8`` wire's blocks and their scales never straddle two shards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgewise.runtime.narrowing import BLOCK
from edgewise.runtime.noise_scale import NoiseScale

__all__ = ["LAYOUT", "SHARD", "StepSquares", "finished", "pooled_noise", "shard_range"]

SHARD = "shard"
"""A sharded server's checkpoint meta key: ``[index, count]``."""

LAYOUT = "layout"
"""Its meta key of the flat parameters' layout: ``{"p.float32": [name, ...]}``, in order."""

StepSquares = tuple[list[tuple[int, float]], float, list[float] | None, float | None]
"""One synchronous step as a server saw it: each push's (samples, squared norm of its
gradients in the server's range), the squared norm of their mean, and the same two of the
Adam-preconditioned gradients (None before the preconditioner is trusted)."""


def shard_range(numel: int, index: int, count: int) -> tuple[int, int]:
    """The range ``[lo, hi)`` of a flat tensor of ``numel`` values that shard ``index`` of
    ``count`` holds: as equal as whole blocks of :data:`BLOCK` allow, the last taking the
    remainder (a range may be empty for a tensor smaller than ``count`` blocks)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist")
    blocks = -(-numel // BLOCK)

    def bound(i: int) -> int:
        return min(numel, (blocks * i // count) * BLOCK)

    return bound(index), (numel if index == count - 1 else bound(index + 1))


def pooled_noise(logs: Sequence[Sequence[StepSquares]]) -> tuple[float | None, float | None]:
    """The epoch's gradient noise scale and that of the preconditioned gradients
    (``runtime.noise_scale``) from every shard's log of its steps: a squared norm over the
    whole model is the sum of the shards' over their ranges, so each step's are summed
    before the estimate."""
    plain, adam = NoiseScale(), NoiseScale()
    for steps in zip(*logs, strict=True):
        batches = [b for b, _ in steps[0][0]]
        squares = [sum(s[0][j][1] for s in steps) for j in range(len(batches))]
        plain.observe(list(zip(batches, squares, strict=True)), sum(s[1] for s in steps))
        if all(s[2] is not None and s[3] is not None for s in steps):
            adam_sq = [sum(s[2][j] for s in steps) for j in range(len(batches))]
            adam.observe(list(zip(batches, adam_sq, strict=True)),
                         sum(float(s[3]) for s in steps))
    return plain.simple(), adam.simple()


def finished(replies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One server's ``finish_epoch`` reply from its shards' (in shard order): shard 0's (the
    samples applied, the staleness, the version: the same steps on every shard), with the
    noise scales pooled over every shard's squares (:func:`pooled_noise`) and the longest
    time a shard spent serving pushes."""
    out = {k: v for k, v in replies[0].items() if k != "noise_squares"}
    if len(replies) > 1:
        out["noise_scale"], out["noise_scale_adam"] = pooled_noise(
            [r["noise_squares"] for r in replies])
        out["push_seconds"] = max(float(r.get("push_seconds", 0.0)) for r in replies)
    return out
