"""Command-line flags that name a workload's model (``--model``, ``--model-arg``,
``--weights``, ``--input-shape``, ``--classes``) or a whole workload file (``--workload``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
import yaml

from edgewise.errors import ConfigError
from edgewise.nn.workload import Workload, load_workload, workload_from_flags

__all__ = ["ClassesOpt", "InputShapeOpt", "ModelArgOpt", "WeightsOpt", "WorkloadFileOpt",
           "model_args", "parse_shape", "workload_from_cli"]

ModelArgOpt = typer.Option(
    [], "--model-arg", metavar="KEY=VALUE",
    help="a config or factory keyword argument, VALUE read as YAML (depth_multiplier=0.35, "
         "hidden_sizes=[32,64]); repeatable")
WeightsOpt = typer.Option(None, "--weights",
                          help="a local .safetensors file, loaded strictly (nothing unpickled)")
InputShapeOpt = typer.Option(None, "--input-shape", metavar="C,H,W",
                             help="one sample's shape, e.g. 3,32,32 (default: from the model)")
ClassesOpt = typer.Option(None, "--classes", min=1, help="classes the model outputs")
WorkloadFileOpt = typer.Option(None, "--workload",
                               help="a workload YAML file (model, model_args, weights, task)")


def model_args(pairs: list[str], field: str = "--model-arg") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as keyword arguments, each value parsed as YAML."""
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ConfigError(f"{pair!r} is not KEY=VALUE", field=field)
        try:
            found[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{pair!r}: the value is not YAML ({exc})", field=field) from None
    return found


def parse_shape(text: str | None, field: str = "--input-shape") -> tuple[int, ...] | None:
    """``3,32,32`` (or ``3x32x32``) as a tuple of positive ints."""
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(f"{text!r} is not a shape like 3,32,32", field=field)
    return tuple(int(p) for p in parts)


def workload_from_cli(model: str | None, *, args: list[str] | None = None,
                      weights: Path | None = None, input_shape: str | None = None,
                      classes: int | None = None, workload: Path | None = None,
                      data: str | None = None, default: str | None = None,
                      model_field: str = "--model") -> Workload:
    """The workload the flags name: ``--workload FILE`` (flags given beside it override its
    weights, input shape and classes) or the model flags; ``default`` when neither names a
    model. A hub name, a pickled checkpoint or an unknown form is a ConfigError, before
    anything is built or read."""
    shape = parse_shape(input_shape)
    if workload is not None:
        if model is not None:
            raise ConfigError("give a model or --workload, not both", field=model_field)
        found = load_workload(workload)
        task = replace(found.task, input_shape=shape or found.task.input_shape,
                       num_classes=classes or found.task.num_classes)
        return _files_exist(replace(found, task=task,
                                    weights=weights.absolute() if weights else found.weights))
    chosen = model if model is not None else default
    if chosen is None:
        raise ConfigError("name a model (a built-in name, hf:, py: or export:) or "
                          "--workload FILE", field=model_field)
    return _files_exist(workload_from_flags(chosen, weights, data,
                                            model_args=model_args(args or []),
                                            input_shape=shape, classes=classes))


def _files_exist(workload: Workload) -> Workload:
    """The weights and program files the flags name exist (checked before any build)."""
    if workload.weights is not None and not workload.weights.is_file():
        raise ConfigError(f"{workload.weights}: no such file", field="--weights")
    if workload.model.kind == "export" and not Path(workload.model.ref).is_file():
        raise ConfigError(f"{workload.model.ref}: no such file", field="model")
    return workload
