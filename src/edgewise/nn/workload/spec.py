"""The workload domain objects (model + optional weights + data + task) and their string forms."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from edgewise.errors import ConfigError

__all__ = [
    "BUILTIN_MODELS", "DIGITS", "DataSpec", "ModelSpec", "TaskSpec", "Workload", "builtin_names",
    "builtin_workload", "parse_data", "parse_model",
]  # fmt: skip

ModelKind = Literal["builtin", "hf", "py", "export"]
DataKind = Literal["digits", "images", "npz"]
Loss = Literal["cross-entropy"]
Metric = Literal["top1", "top5"]

#: Built-in models that train on the quick default data set (the zoo's names are built-in too).
BUILTIN_MODELS = ("digits-cnn",)

_CONFIG_CLASS = re.compile(r"[A-Za-z][A-Za-z0-9]*Config")
_PY_TARGET = re.compile(r"(?P<module>[^:]+):(?P<factory>[A-Za-z_][A-Za-z0-9_]*)")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_PICKLED = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")
_FORMS = ("a built-in name, hf:<ConfigClass>, py:package.module:factory, "
          "py:path/to/file.py:factory or export:FILE.pt2")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which network to build: ``kind`` says how, ``ref`` names it (a built-in name, a
    transformers config class, ``module:factory``, or a ``.pt2`` path), ``args`` are the
    config or factory keyword arguments. ``batchnorm_momentum``, when set, replaces every
    BatchNorm layer's momentum (transformers' MobileNetV2 ports TensorFlow's decay 0.997 as
    PyTorch's momentum, so its running statistics are about the last batch's alone)."""

    kind: ModelKind
    ref: str
    args: Mapping[str, Any] = field(default_factory=lambda: _frozen(None))
    batchnorm_momentum: float | None = None

    @property
    def text(self) -> str:
        """The spec's string form, as a user writes it (``hf:MobileNetV2Config``)."""
        return self.ref if self.kind == "builtin" else f"{self.kind}:{self.ref}"

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable by the standard library too (the manager's capped children send a
        workload back through a pipe): ``args`` travels as a plain dict."""
        return (_model_spec, (self.kind, self.ref, dict(self.args), self.batchnorm_momentum))


def _model_spec(kind: ModelKind, ref: str, args: dict[str, Any],
                batchnorm_momentum: float | None) -> ModelSpec:
    return ModelSpec(kind, ref, _frozen(args), batchnorm_momentum)


@dataclass(frozen=True, slots=True)
class DataSpec:
    """Where the samples come from; ``val_fraction`` of them (stratified, seeded) validate
    unless an npz file carries its own ``x_val``/``y_val``. ``mean``/``std`` normalise image
    channels after scaling pixels to [0, 1]."""

    kind: DataKind
    path: Path | None = None
    val_fraction: float = 0.2
    mean: tuple[float, ...] = (0.5,)
    std: tuple[float, ...] = (0.5,)

    @property
    def text(self) -> str:
        return self.kind if self.path is None else f"{self.kind}:{self.path}"


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What is learnt: the loss, the metric (top-1 accuracy by default), the per-sample input
    shape (C, H, W) and the classes (names, or just how many). ``None`` means "from the data"."""

    loss: Loss = "cross-entropy"
    metric: Metric = "top1"
    label_smoothing: float = 0.0
    input_shape: tuple[int, ...] | None = None
    classes: tuple[str, ...] | None = None
    num_classes: int | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """A model (optionally with local safetensors weights), the data it trains on and the
    task; everything the runtime and the problems need to build, load, feed and score it."""

    model: ModelSpec
    data: DataSpec | None = DataSpec("digits")
    task: TaskSpec = TaskSpec()
    weights: Path | None = None
    name: str = ""

    @property
    def label(self) -> str:
        """A short name for logs and results: the given name or ``model on data``."""
        if self.name:
            return self.name
        return self.model.text + (f" on {self.data.text}" if self.data else "")

    @property
    def is_default_digits(self) -> bool:
        """True for a built-in model on the bundled digits (no files involved)."""
        return self.model.kind == "builtin" and self.weights is None and \
            self.data is not None and self.data.kind == "digits"


DIGITS = Workload(ModelSpec("builtin", "digits-cnn"))


def builtin_names() -> tuple[str, ...]:
    """Built-in model names: the trainable defaults, then the zoo's architectures."""
    from edgewise.nn.zoo import zoo_names

    return (*BUILTIN_MODELS, *zoo_names())


def builtin_workload(model: str) -> Workload:
    """A built-in model on the bundled digits: what a plain ``model`` name always meant."""
    return Workload(parse_model(model))


def _hub_refusal(text: str) -> ConfigError:
    return ConfigError(
        f"{text!r} looks like a Hugging Face Hub model id; nothing is downloaded here: use "
        "hf:<ConfigClass> (e.g. hf:MobileNetV2Config) with a local safetensors weights file",
        field="model")


def parse_model(text: str, args: Mapping[str, Any] | None = None,
                base_dir: Path | None = None) -> ModelSpec:
    """A model string as a :class:`ModelSpec`; ConfigError (field ``model``) for a hub id,
    a pickled checkpoint or an unknown form. Never touches the network or the file system."""
    text = text.strip()
    kind, sep, ref = text.partition(":")
    if not sep:
        if text.endswith(_PICKLED):
            raise ConfigError(f"{text!r} is a pickled checkpoint, which is never loaded; give "
                              "the architecture and its weights as safetensors", field="model")
        if text in builtin_names():
            return ModelSpec("builtin", text, _frozen(args))
        if "/" in text:
            raise _hub_refusal(text)
        raise ConfigError(f"unknown model {text!r}; use {_FORMS} "
                          f"(built-in: {', '.join(builtin_names())})", field="model")
    if kind == "hf":
        if not _CONFIG_CLASS.fullmatch(ref):
            raise _hub_refusal(text)
        return ModelSpec("hf", ref, _frozen(args))
    if kind == "py":
        return ModelSpec("py", _py_ref(ref, base_dir), _frozen(args))
    if kind == "export":
        if not ref.endswith(".pt2"):
            raise ConfigError(f"export:{ref} must name a torch.export .pt2 file", field="model")
        return ModelSpec("export", str(_resolve(ref, base_dir)), _frozen(args))
    if kind in ("http", "https", "hf-hub", "hub"):
        raise _hub_refusal(text)
    raise ConfigError(f"unknown model kind {kind!r}; use {_FORMS}", field="model")


def _py_ref(ref: str, base_dir: Path | None) -> str:
    """``module:factory`` (dotted module) or ``file.py:factory`` (the file's path resolved)."""
    match = _PY_TARGET.fullmatch(ref)
    if match is None:
        raise ConfigError(f"py:{ref} must be py:package.module:factory or "
                          "py:path/to/file.py:factory", field="model")
    module = match["module"]
    if module.endswith(".py"):
        return f"{_resolve(module, base_dir)}:{match['factory']}"
    if not _DOTTED.fullmatch(module):
        raise ConfigError(f"py:{ref}: {module!r} is not a dotted module name", field="model")
    return ref


def _resolve(path: str | Path, base_dir: Path | None) -> Path:
    p = Path(path).expanduser()
    return (p if p.is_absolute() or base_dir is None else base_dir / p).absolute()


def parse_data(text: str, base_dir: Path | None = None, **options: Any) -> DataSpec:
    """A data string (``digits``, ``images:DIR``, ``npz:FILE``) as a :class:`DataSpec`;
    ConfigError (field ``data``) otherwise. Paths are resolved against ``base_dir``."""
    text = text.strip()
    kind, sep, ref = text.partition(":")
    if not sep and text == "digits":
        return DataSpec("digits", None, **options)
    if kind in ("images", "npz") and ref:
        return DataSpec(kind, _resolve(ref, base_dir), **options)  # type: ignore[arg-type]
    raise ConfigError(f"unknown data {text!r}; use digits, images:DIR (one folder per class) "
                      "or npz:FILE (arrays x and y)", field="data")
