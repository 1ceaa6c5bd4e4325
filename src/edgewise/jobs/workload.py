"""The workload spec as a manager's HTTP body takes it: what a YAML file can say, minus what
would run the caller's code or read the manager's files at large.

- ``model``: a built-in name or ``hf:<ConfigClass>``; ``py:`` factories and ``export:``
  programs are refused (importing a module, or loading a pickled program, runs code).
- ``data`` and ``weights``: ``digits``, or paths *relative to the manager's data folder*
  (:func:`data_dir`: ``EDGEWISE_DATA_DIR``, which ``edgewise serve --data-dir`` sets; default
  ``<state dir>/data``), without ``..``; the files are put there by whoever runs the manager.
- Bounded: at most 32 model arguments; each an integer within ±2**20 (1,048,576), a
  finite number within ±1e9, a boolean or a string of at most 200 characters. The model
  that the arguments build is bounded by the manager's planning limits (its dry run runs
  in a child process with a time and a memory limit).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from edgewise.errors import ConfigError
from edgewise.nn.workload.schema import workload_from_dict
from edgewise.nn.workload.spec import Workload, builtin_names, parse_model

__all__ = ["DATA_DIR_ENV", "MAX_ARG_FLOAT", "MAX_ARG_INT", "HttpWorkload", "data_dir"]

DATA_DIR_ENV = "EDGEWISE_DATA_DIR"
_HF = re.compile(r"hf:[A-Za-z][A-Za-z0-9]{0,63}Config")
_REL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./ -]{0,511}")
Short = Annotated[str, StringConstraints(max_length=200)]
MAX_ARG_INT = 2**20
MAX_ARG_FLOAT = 1e9
Scalar = (bool | Annotated[int, Field(ge=-MAX_ARG_INT, le=MAX_ARG_INT)]
          | Annotated[float, Field(ge=-MAX_ARG_FLOAT, le=MAX_ARG_FLOAT)] | Short)


def data_dir() -> Path | None:
    """The folder an HTTP workload's files must lie in; None when none is set."""
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value) if value else None


def _relative(value: str, what: str) -> str:
    if not _REL.fullmatch(value) or ".." in Path(value).parts:
        raise ValueError(f"{what} must be a path relative to the manager's data folder "
                         "(letters, digits, _ . / - and spaces; no '..', not absolute)")
    return value


class HttpWorkload(BaseModel):
    """A user's model and data for a manager job (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: Short = ""
    model: Annotated[str, StringConstraints(min_length=1, max_length=100)] = Field(
        description="a built-in name or hf:<ConfigClass> (py: and export: are refused)")
    model_args: dict[Annotated[str, StringConstraints(max_length=64)], Scalar] = Field(
        default_factory=dict, max_length=32, description="config keyword arguments")
    batchnorm_momentum: float | None = Field(default=None, gt=0, le=1)
    weights: Short | None = Field(
        default=None, description="a .safetensors file in the manager's data folder")
    data: Annotated[str, StringConstraints(max_length=520)] = Field(
        default="digits", description="digits, images:DIR or npz:FILE in the data folder")
    val_fraction: float = Field(default=0.2, gt=0, lt=1)
    mean: list[float] = Field(default=[0.5], min_length=1, max_length=4)
    std: list[Annotated[float, Field(gt=0)]] = Field(default=[0.5], min_length=1, max_length=4)
    input_shape: list[Annotated[int, Field(gt=0, le=4096)]] | None = Field(
        default=None, min_length=1, max_length=4)
    classes: (Annotated[int, Field(ge=1, le=100_000)]
              | Annotated[list[Short], Field(max_length=10_000)] | None) = None

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value in builtin_names() or _HF.fullmatch(value):
            return value
        if value.startswith("hf:") or "/" in value:
            try:  # a Hub id: its refusal says why nothing is downloaded
                parse_model(value)
            except ConfigError as exc:
                raise ValueError(exc.problem) from None
        if value.startswith(("py:", "export:")):
            raise ValueError("py: and export: models are not taken over HTTP (they would run "
                             "the caller's code on the manager): use a built-in name or "
                             "hf:<ConfigClass>, or run them with the command line")
        raise ValueError(f"unknown model {value!r}: a built-in name "
                         f"({', '.join(builtin_names())}) or hf:<ConfigClass>")

    @field_validator("model_args", mode="before")
    @classmethod
    def _integers_in_bounds(cls, value: Any) -> Any:
        """An integer beyond ±MAX_ARG_INT is refused, not read as a float."""
        if isinstance(value, dict):
            for key, arg in value.items():
                if isinstance(arg, int) and not isinstance(arg, bool) and \
                        abs(arg) > MAX_ARG_INT:
                    raise ValueError(f"model_args.{str(key)[:64]}: integers are limited to "
                                     f"±{MAX_ARG_INT:,}")
        return value

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: str | None) -> str | None:
        return None if value is None else _relative(value, "weights")

    @field_validator("data")
    @classmethod
    def _data(cls, value: str) -> str:
        if value == "digits":
            return value
        kind, _, path = value.partition(":")
        if kind not in ("images", "npz"):
            raise ValueError("must be digits, images:DIR or npz:FILE")
        _relative(path, "data")
        return value

    def uses_files(self) -> bool:
        return self.data != "digits" or self.weights is not None

    def to_workload(self) -> Workload:
        """The workload, its paths taken in :func:`data_dir`; ConfigError (naming the field)
        if a file is needed and no data folder is set, or for anything the spec rejects."""
        folder = data_dir()
        if self.uses_files() and folder is None:
            raise ConfigError(f"this manager has no data folder ({DATA_DIR_ENV}; `edgewise "
                              "serve --data-dir DIR`): only digits can be used",
                              field="workload.data")
        doc: dict[str, Any] = {
            "name": self.name, "model": self.model, "model_args": dict(self.model_args),
            "batchnorm_momentum": self.batchnorm_momentum, "weights": self.weights,
            "data": self.data, "data_args": {"val_fraction": self.val_fraction,
                                             "mean": self.mean, "std": self.std},
            "task": {"input_shape": self.input_shape, "classes": self.classes}}
        if folder is not None:
            _inside(folder, self)
        try:
            return workload_from_dict(doc, "workload", base_dir=folder)
        except ConfigError as exc:
            raise ConfigError(exc.problem, field=f"workload.{exc.field or 'model'}") from None


def _inside(folder: Path, spec: HttpWorkload) -> None:
    """ConfigError if a path of ``spec``, links followed, leads out of ``folder``."""
    root = folder.resolve()
    paths = {"data": spec.data.partition(":")[2] if spec.data != "digits" else None,
             "weights": spec.weights}
    for field, path in paths.items():
        if path is not None and not (root / path).resolve().is_relative_to(root):
            raise ConfigError("leads out of the manager's data folder (a link?)",
                              field=f"workload.{field}")
