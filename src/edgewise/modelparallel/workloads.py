"""Which model a SROLE job trains: one of SROLE's three (§V-A) by name, or any workload spec
(``hf:``, ``py:``, a zoo name, with optional safetensors weights), traced for its levels the
same way."""

from __future__ import annotations

import json
from dataclasses import replace

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.modelparallel.models import build_srole_model, srole_models
from edgewise.nn.workload import (
    Workload,
    build_model,
    example_input,
    workload_from_dict,
    workload_to_dict,
)

__all__ = ["ModelRef", "build_keyed", "known", "model_key", "model_label"]

ModelRef = str | Workload
"""A SROLE model name, or a workload whose model the jobs train."""

_DIGITS_SHAPE = (1, 8, 8)


def model_key(model: ModelRef) -> str:
    """A hashable text that rebuilds the model: the name, or the workload's JSON document."""
    if isinstance(model, str):
        return model
    return json.dumps(workload_to_dict(model), sort_keys=True)


def model_label(model: ModelRef) -> str:
    """The name jobs carry: SROLE's model name, or the workload's label."""
    return model if isinstance(model, str) else model.label


def build_keyed(key: str) -> tuple[str, nn.Module, torch.Tensor]:
    """The label, the model behind a :func:`model_key` in eval mode and a batch-1 example.

    Raises
    ------
    ConfigError
        An unknown SROLE model name, or a workload whose model cannot be built.
    """
    if not key.startswith("{"):
        return (key, *build_srole_model(key))
    workload = workload_from_dict(json.loads(key), "model")
    if workload.model.kind == "export":
        raise ConfigError("an export: program is for inference only; SROLE trains the model",
                          field="model")
    if workload.model.ref == "digits-cnn" and workload.task.input_shape is None:
        workload = replace(workload, task=replace(workload.task, input_shape=_DIGITS_SHAPE))
    model = build_model(workload).eval()
    return workload.label, model, example_input(workload, batch=1)


def known(model: ModelRef) -> None:
    """ConfigError naming the known models unless ``model`` is one of SROLE's or a workload."""
    if isinstance(model, str) and model not in srole_models():
        raise ConfigError(f"unknown model {model!r}; known: {', '.join(srole_models())}, or a "
                          "workload model (hf:, py:, a zoo name)", field="model")
