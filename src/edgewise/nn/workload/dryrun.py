"""Validation before any actor starts: files, data and classes, then one batch through the
model on the driver (shapes, dtype, a finite loss, gradients) and an estimate of its memory."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.tracing import TRACE_LOCK
from edgewise.nn.workload.images import verify_images
from edgewise.nn.workload.modelbuild import build_network
from edgewise.nn.workload.sources import DataSource, open_data, sample_shape
from edgewise.nn.workload.spec import Workload
from edgewise.nn.workload.task import check_classes, loss
from edgewise.nn.workload.weights import load_weights

__all__ = ["DryRun", "build_model", "example_input", "resolved", "validate"]

_DRY_BATCH = 8
_ADAM_COPIES = 4  # weights, gradients and Adam's two moments


@dataclass(frozen=True, slots=True)
class DryRun:
    """What the dry run found: the data's sizes and shape, the classes the model outputs,
    its parameters and the estimated memory of one worker's training step."""

    train_samples: int
    val_samples: int
    input_shape: tuple[int, ...]
    num_classes: int
    parameters: int
    memory_mb: float
    seconds: float


def resolved(workload: Workload, dry: DryRun) -> Workload:
    """``workload`` with what the dry run found filled in (input shape, number of classes),
    so that every actor builds the same network without opening the data."""
    task = replace(workload.task, input_shape=dry.input_shape, num_classes=dry.num_classes)
    return replace(workload, task=task)


def build_model(workload: Workload, *, seed: int = 0, num_classes: int | None = None,
                input_shape: tuple[int, ...] | None = None) -> nn.Module:
    """The workload's model with its weights loaded (if any): what every actor builds.
    ``num_classes`` and ``input_shape`` default to the task's."""
    num_classes = num_classes if num_classes is not None else workload.task.num_classes
    input_shape = input_shape if input_shape is not None else workload.task.input_shape
    model = build_network(workload, seed=seed, num_classes=num_classes,
                          input_shape=input_shape)
    if workload.weights is not None:
        load_weights(model, workload.weights)
    return model


def example_input(workload: Workload, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """A random input batch for the model (for tracing and partitioning): the task's or the
    data's sample shape, else the zoo's example or the exported program's sample input."""
    shape = sample_shape(workload)
    if shape is None and workload.data is not None and workload.data.kind != "digits":
        shape = open_data(workload, seed).shape
    if shape is None and workload.model.kind == "export":
        from edgewise.nn.workload.exported import load_export

        sample = load_export(Path(workload.model.ref)).example_inputs
        if sample and sample[0] and isinstance(sample[0][0], torch.Tensor):
            shape = tuple(sample[0][0].shape[1:])
    if shape is None and workload.model.kind == "builtin" and workload.model.ref != "digits-cnn":
        from edgewise.nn import zoo

        _, example = zoo.build(workload.model.ref)
        tensor = next(iter(example.values())) if isinstance(example, dict) else example
        return tensor.expand(batch, *tensor.shape[1:]).clone()
    if shape is None:
        raise ConfigError("the model's input shape is unknown; give it, e.g. [3, 224, 224]",
                          field="task.input_shape")
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, *shape, generator=generator)


def _check_files(workload: Workload) -> None:
    """The local files the spec names exist (a one-line error naming the field if not)."""
    if workload.weights is not None and not workload.weights.is_file():
        raise ConfigError(f"{workload.weights}: no such file", field="weights")
    if workload.model.kind == "export" and not Path(workload.model.ref).is_file():
        raise ConfigError(f"{workload.model.ref}: no such file", field="model")
    data = workload.data
    if data is not None and data.kind == "npz" and not Path(str(data.path)).is_file():
        raise ConfigError(f"{data.path}: no such file", field="data")
    if data is not None and len(data.mean) != len(data.std):
        raise ConfigError("mean and std need the same number of channels",
                          field="data_args.std")


def validate(workload: Workload, *, seed: int = 0, batch_size: int = 32,
             memory_mb: float | None = None, training: bool = True) -> DryRun:
    """Check ``workload`` end to end on this machine before anything is started.

    Runs one batch (at most 8 samples) of the training data through the model in training
    mode, backward included; scales its saved activations to ``batch_size`` for the memory
    estimate, which must stay under ``memory_mb`` when given.

    Raises
    ------
    ConfigError
        One line naming the field: a missing file, an empty class folder, a corrupt image,
        classes that disagree, a model that is inference-only or whose output does not
        match the classes, weights that do not fit, or too little memory.
    """
    started = time.perf_counter()
    _check_files(workload)
    if training and workload.model.kind == "export":
        raise ConfigError("an export: program is for inference only; train a py: or hf: "
                          "model", field="model")
    source = open_data(workload, seed)
    if source.folder is not None:
        verify_images(source.folder)
    classes = check_classes(workload.task, source.classes, named=source.folder is not None)
    _check_shape(workload, source)
    model = build_model(workload, seed=seed, num_classes=classes, input_shape=source.shape)
    rows = 1 if workload.model.kind == "export" else _DRY_BATCH  # programs may fix batch 1
    batch = source.read("train", np.arange(min(rows, source.size()), dtype=np.int64))
    x, y = torch.from_numpy(batch.x), torch.from_numpy(batch.y)
    with TRACE_LOCK:  # a trace in another thread would capture this forward pass
        activation_bytes = _step(workload, model.train(training), x, y, classes)
    params = sum(p.numel() for p in model.parameters())
    state_mb = params * 4 * (_ADAM_COPIES if training else 1) / 2**20
    memory = state_mb + activation_bytes / max(len(y), 1) * batch_size / 2**20
    if memory_mb is not None and memory > memory_mb:
        raise ConfigError(f"one training step at batch {batch_size} needs about {memory:.0f} "
                          f"MB, a worker has {memory_mb:.0f} MB", field="batch_size")
    return DryRun(source.size("train"), source.size("val"), source.shape, classes, params,
                  memory, time.perf_counter() - started)


def _check_shape(workload: Workload, source: DataSource) -> None:
    want = workload.task.input_shape
    if want is not None and tuple(want) != source.shape:
        raise ConfigError(f"the data's samples are {list(source.shape)}, the task says "
                          f"{list(want)}", field="task.input_shape")


def _step(workload: Workload, model: nn.Module, x: torch.Tensor, y: torch.Tensor,
          classes: int) -> int:
    """Forward (and backward when training) one batch; the bytes autograd saved."""
    saved = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[0] += t.numel() * t.element_size()
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                torch.set_grad_enabled(model.training):
            out = model(x)
    except Exception as exc:  # the user's model may fail in any way on a wrong input
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise ConfigError(f"the model cannot take a batch of shape {list(x.shape)} "
                          f"({x.dtype}): {type(exc).__name__}: {first}",
                          field="task.input_shape") from None
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise ConfigError("the model's output is not a floating-point logits tensor",
                          field="model")
    if tuple(out.shape) != (len(y), classes):
        raise ConfigError(f"the model outputs shape {list(out.shape)} for {len(y)} samples, "
                          f"the task has {classes} classes (want [{len(y)}, {classes}])",
                          field="task.classes")
    if model.training:
        value = loss(workload.task, out, y)
        if not torch.isfinite(value):
            raise ConfigError("the loss of the first batch is not finite", field="model")
        value.backward()  # type: ignore[no-untyped-call]
    return saved[0]
