"""The workload spec as users write it (YAML file, HTTP body, CLI flags), validated with pydantic
and turned into a :class:`Workload`; every error is a ConfigError naming its field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from edgewise.errors import ConfigError, config_error
from edgewise.nn.workload.spec import (
    DataSpec,
    ModelSpec,
    TaskSpec,
    Workload,
    parse_data,
    parse_model,
)

__all__ = ["WorkloadFile", "load_workload", "workload_from_dict", "workload_from_flags",
           "workload_to_dict"]

Positive = Annotated[int, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataArgs(_Strict):
    val_fraction: float = Field(default=0.2, gt=0, lt=1,
                                description="validation share (stratified, seeded)")
    mean: list[float] = Field(default=[0.5], min_length=1, description="per-channel mean")
    std: list[Annotated[float, Field(gt=0)]] = Field(default=[0.5], min_length=1)


class TaskFile(_Strict):
    loss: Literal["cross-entropy"] = "cross-entropy"
    metric: Literal["top1", "top5"] = "top1"
    label_smoothing: float = Field(default=0.0, ge=0, lt=1)
    input_shape: list[Positive] | None = Field(default=None, min_length=1, max_length=4,
                                               description="one sample, e.g. [3, 32, 32]")
    classes: int | list[str] | None = Field(default=None, description="how many, or names")

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: int | list[str] | None) -> int | list[str] | None:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be at least 1")
        if isinstance(value, list) and (not value or len(set(value)) != len(value)):
            raise ValueError("must be distinct class names, at least one")
        return value


class WorkloadFile(_Strict):
    """Top level of a workload file."""

    name: str = Field(default="", description="a label for logs and results")
    model: str = Field(min_length=1, description="built-in name, hf:, py: or export:")
    model_args: dict[str, Any] = Field(default_factory=dict,
                                       description="config or factory keyword arguments")
    batchnorm_momentum: float | None = Field(
        default=None, gt=0, le=1, description="replace every BatchNorm layer's momentum")
    weights: str | None = Field(default=None, description="a local .safetensors file")
    data: str | None = Field(default="digits", description="digits, images:DIR or npz:FILE")
    data_args: DataArgs = DataArgs()
    task: TaskFile = TaskFile()

    def to_workload(self, base_dir: Path | None) -> Workload:
        model = _field("model", lambda: parse_model(self.model, self.model_args, base_dir))
        if self.batchnorm_momentum is not None:
            model = replace(model, batchnorm_momentum=self.batchnorm_momentum)
        args = self.data_args
        data = None if self.data is None else _field("data", lambda: parse_data(
            str(self.data), base_dir, val_fraction=args.val_fraction, mean=tuple(args.mean),
            std=tuple(args.std)))
        weights = None
        if self.weights is not None:
            weights = Path(self.weights).expanduser()
            if not weights.is_absolute() and base_dir is not None:
                weights = base_dir / weights
            weights = weights.absolute()
        return Workload(model, data, _task(self.task), weights, self.name)


def _field(name: str, build: Any) -> Any:
    try:
        return build()
    except ConfigError as exc:
        raise ConfigError(exc.problem, field=exc.field or name) from None


def _task(task: TaskFile) -> TaskSpec:
    classes = task.classes
    return TaskSpec(task.loss, task.metric, task.label_smoothing,
                    tuple(task.input_shape) if task.input_shape else None,
                    tuple(classes) if isinstance(classes, list) else None,
                    classes if isinstance(classes, int) else None)


def workload_from_dict(data: Any, source: str = "<dict>",
                       base_dir: Path | None = None) -> Workload:
    """Validate a parsed workload document (YAML or an HTTP body). Relative paths are
    resolved against ``base_dir`` (the file's folder), else the working directory."""
    if not isinstance(data, dict):
        raise ConfigError("a workload must be a mapping (model:, data:, ...)", source=source)
    try:
        spec = WorkloadFile.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, source) from None
    try:
        return spec.to_workload(base_dir)
    except ConfigError as exc:
        raise ConfigError(exc.problem, source=source, field=exc.field) from None


def load_workload(path: str | Path) -> Workload:
    """The workload in a YAML file; its relative paths are relative to the file's folder."""
    from edgewise.cluster.schema import read_yaml

    path = Path(path)
    return workload_from_dict(read_yaml(path), str(path), path.parent)


def workload_from_flags(model: str, weights: str | Path | None = None,
                        data: str | None = "digits", *, model_args: dict[str, Any] | None = None,
                        input_shape: tuple[int, ...] | None = None,
                        classes: int | None = None,
                        batchnorm_momentum: float | None = None) -> Workload:
    """A workload from inline CLI flags (``--model``, ``--weights``, ``--data``); errors name
    the flag's field like a file's would."""
    doc: dict[str, Any] = {"model": model, "model_args": model_args or {}, "data": data,
                           "batchnorm_momentum": batchnorm_momentum}
    if weights is not None:
        doc["weights"] = str(weights)
    task: dict[str, Any] = {}
    if input_shape is not None:
        task["input_shape"] = list(input_shape)
    if classes is not None:
        task["classes"] = classes
    if task:
        doc["task"] = task
    return workload_from_dict(doc, "command line")


def workload_to_dict(workload: Workload) -> dict[str, Any]:
    """The JSON-able document of a workload (paths absolute); ``workload_from_dict`` of it
    gives the same workload back."""
    data: DataSpec | None = workload.data
    task = workload.task
    classes: Any = list(task.classes) if task.classes else task.num_classes
    model: ModelSpec = workload.model
    doc: dict[str, Any] = {
        "name": workload.name, "model": model.text, "model_args": dict(model.args),
        "batchnorm_momentum": model.batchnorm_momentum,
        "weights": str(workload.weights) if workload.weights else None,
        "data": data.text if data else None,
        "task": {"loss": task.loss, "metric": task.metric,
                 "label_smoothing": task.label_smoothing,
                 "input_shape": list(task.input_shape) if task.input_shape else None,
                 "classes": classes},
    }
    if data is not None:
        doc["data_args"] = {"val_fraction": data.val_fraction, "mean": list(data.mean),
                            "std": list(data.std)}
    return doc
