"""Ekya's student and golden model from a workload spec: the user's network (``hf:``, ``py:``,
a built-in, with optional safetensors weights) as a student that retrains with frozen layers
and travels as a transport frame that names its spec."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.tracing import TRACE_LOCK
from edgewise.nn.workload import (
    Workload,
    build_model,
    workload_from_dict,
    workload_to_dict,
)

__all__ = ["GROUPS", "SpecStudent", "check_pair", "spec_model", "spec_student",
           "student_from_text"]

GROUPS = 4  # freezable layer groups, as the built-in student's four parametric layers


class SpecStudent(nn.Module):
    """A user's network as Ekya's student. ``doc`` is its workload document with the input
    shape and classes filled in, so that any process rebuilds the same network from it;
    :meth:`layers` are its parametric leaf modules in order, cut into :data:`GROUPS`
    contiguous groups (freezing ``k`` layers freezes the first ``k`` groups, as freezing the
    built-in student's first ``k`` of four layers)."""

    def __init__(self, net: nn.Module, doc: dict[str, Any]) -> None:
        super().__init__()
        self.net = net
        self.doc = doc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out

    @property
    def text(self) -> str:
        """The spec's JSON text (what a frame carries)."""
        return json.dumps(self.doc, sort_keys=True)

    def layers(self) -> list[nn.Module]:
        """:data:`GROUPS` groups of the parametric leaf modules, input side first."""
        leaves = [m for m in self.net.modules()
                  if not list(m.children()) and any(True for _ in m.parameters(recurse=False))]
        groups: list[nn.Module] = []
        for g in range(GROUPS):
            part = leaves[g * len(leaves) // GROUPS:(g + 1) * len(leaves) // GROUPS]
            groups.append(nn.ModuleList(part))
        return groups


def _resolved(workload: Workload, field: str) -> Workload:
    task = workload.task
    if task.input_shape is None:
        size = workload.model.args.get("image_size")
        if not isinstance(size, int):
            raise ConfigError("the model's input shape is unknown; give it, e.g. "
                              "--input-shape 3,32,32", field=field)
        channels = int(workload.model.args.get("num_channels", 3))
        task = replace(task, input_shape=(channels, size, size))
    if task.num_classes is None and task.classes is None:
        task = replace(task, num_classes=int(workload.model.args.get("num_labels", 10)))
    return replace(workload, task=task, data=None)


def spec_model(workload: Workload, seed: int = 0, field: str = "model") -> nn.Module:
    """The workload's network in eval mode with its weights (strictly loaded) or a random
    initialisation from ``seed``; its input shape and classes resolved (ConfigError naming
    ``field`` if they cannot be). An ``export:`` program cannot retrain."""
    if workload.model.kind == "export" and field != "golden":
        raise ConfigError("an export: program is for inference only; the student retrains",
                          field=field)
    resolved = _resolved(workload, field)
    try:
        return build_model(resolved, seed=seed).eval()
    except ConfigError as exc:
        raise ConfigError(exc.problem, field=f"{field}.{exc.field}" if exc.field else field
                          ) from None


def spec_student(workload: Workload, seed: int = 0) -> SpecStudent:
    """The workload's network as Ekya's student (see :func:`spec_model`)."""
    resolved = _resolved(workload, "student")
    net = spec_model(resolved, seed, "student")
    return SpecStudent(net, workload_to_dict(replace(resolved, weights=None))).eval()


def student_from_text(text: str, state: dict[str, torch.Tensor]) -> SpecStudent:
    """A student rebuilt from its spec's JSON text and its state dict (from a frame)."""
    workload = workload_from_dict(json.loads(text), "frame")
    student = SpecStudent(build_model(workload), workload_to_dict(workload))
    student.load_state_dict(state)
    return student.eval()


@torch.no_grad()
def check_pair(student: nn.Module, golden: nn.Module, shape: tuple[int, ...]) -> int:
    """The number of classes both models output for an input of ``shape``.

    Raises
    ------
    ConfigError
        Field ``golden``: the two disagree on the classes or do not take the input.
    """
    x = torch.zeros(2, *shape)
    try:
        with TRACE_LOCK:  # a pipeline's trace in another thread would take these forwards in
            widths = [int(m.eval()(x).shape[-1]) for m in (student, golden)]
    except Exception as exc:  # the user's model may fail in any way on a wrong input
        raise ConfigError(f"the models do not take frames of shape {list(shape)}: "
                          f"{type(exc).__name__}: {exc}", field="golden") from None
    if widths[0] != widths[1]:
        raise ConfigError(f"the student outputs {widths[0]} classes, the golden model "
                          f"{widths[1]}", field="golden")
    return widths[0]
