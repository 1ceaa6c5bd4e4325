"""Measuring a model's validation metric with BatchNorm statistics that fit its weights.

Running means and variances that workers averaged into the server are those of weights
several steps old; evaluating with them understates a model that trains fast. Before each
evaluation the statistics are re-estimated on a few training batches for the weights being
evaluated (torch's ``update_bn``: reset, then averaged over the batches), the way SWA
evaluates its averaged weights. The parameter server and the engine's evaluating worker
both measure with :func:`validation_metric`.

What an epoch's checkpoint keeps is what was measured: the server that evaluates re-estimates
its own statistics in place before it checkpoints, and when a worker evaluates, the server
takes the worker's re-estimated statistics in place of its own before it checkpoints
(:func:`statistics_frame`, :func:`load_statistics`). The server's running statistics would
score lower than the reported accuracy while the weights move fast (docs/workloads.md: on
MobileNetV2 ×0.35, DDP's running statistics read 0.25 for seven epochs where the
re-estimated ones read up to 0.86).
"""

from __future__ import annotations

import torch

from edgewise.errors import ConfigError
from edgewise.nn.workload import TaskSpec, Workload, metric_hits
from edgewise.runtime.datastore import read_frames
from edgewise.wire.frames import decode, encode, to_torch

__all__ = ["EVAL_BATCH", "calibration_samples", "load_statistics", "recalibrate_bn",
           "statistics_frame", "validation_metric"]

EVAL_BATCH = 256  # samples per forward pass while evaluating


def calibration_samples(frames: list[bytes], workload: Workload) -> torch.Tensor | None:
    """The training samples of the calibration frames that decode (a corrupt image is left
    out here: the worker whose shard holds it reports it, naming the file)."""
    parts = []
    for frame in frames:
        try:
            parts.append(torch.from_numpy(read_frames([frame], workload).x))
        except ConfigError:
            continue
    return torch.cat(parts) if parts else None


def recalibrate_bn(model: torch.nn.Module, calib_x: torch.Tensor | None) -> bool:
    """Re-estimate ``model``'s BatchNorm statistics on ``calib_x`` (``num_batches_tracked``
    keeps counting trained batches); False if it has no BatchNorm or there is no data."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
             and m.track_running_stats]
    if not norms or calib_x is None or not len(calib_x):
        return False
    counters = [(b, b.clone()) for b in model.buffers() if not b.is_floating_point()]
    momenta = [m.momentum for m in norms]
    training = model.training
    # as torch.optim.swa_utils.update_bn (a cumulative mean over the batches), with dropout
    # off: inference sees no dropout, and the re-estimation then draws no random numbers
    # from the generator that the worker's own training draws its masks from (an
    # evaluation beside the next epoch would otherwise change that epoch's masks)
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    for layer in model.modules():
        if isinstance(layer, torch.nn.modules.dropout._DropoutNd):
            layer.eval()
    with torch.no_grad():
        for i in range(0, len(calib_x), EVAL_BATCH):
            model(calib_x[i : i + EVAL_BATCH])
    for m, momentum in zip(norms, momenta, strict=True):
        m.momentum = momentum
    model.train(training)
    for counter, before in counters:
        counter.copy_(before)
    return True


def validation_metric(model: torch.nn.Module, task: TaskSpec, val_x: torch.Tensor,
                      val_y: torch.Tensor, calib_x: torch.Tensor | None) -> float:
    """The workload's metric on the validation set, in eval mode and in batches, after
    :func:`recalibrate_bn`; NaN for an empty validation set. Leaves ``model`` training."""
    recalibrate_bn(model, calib_x)
    model.eval()
    hits = 0
    with torch.no_grad():
        for start in range(0, len(val_y), EVAL_BATCH):
            part = slice(start, start + EVAL_BATCH)
            hits += metric_hits(task, model(val_x[part]), val_y[part])
    model.train()
    return hits / len(val_y) if len(val_y) else float("nan")


def statistics_frame(model: torch.nn.Module) -> bytes | None:
    """``model``'s floating-point buffers (BatchNorm's running statistics) as a frame of
    ``w.<name>`` tensors, the checkpoint's names; None if it has none."""
    stats = {f"w.{name}": b.detach() for name, b in model.named_buffers() if b.is_floating_point()}
    return encode(stats, compression="lz4") if stats else None


def load_statistics(model: torch.nn.Module, statistics: bytes) -> None:
    """Copy the tensors of a :func:`statistics_frame` into ``model``'s buffers of the same
    name, in place; a name or shape the model lacks is a layout mismatch."""
    buffers = {f"w.{name}": b for name, b in model.named_buffers()}
    with torch.no_grad():
        for name, value in to_torch(decode(statistics)).items():
            if name not in buffers or buffers[name].shape != value.shape:
                raise ValueError(f"the statistics' {name} does not match the model's layout")
            buffers[name].copy_(value)
