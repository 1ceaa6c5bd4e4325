"""Building a workload's network: built-ins, transformers config classes, the user's own
factory, or a ``torch.export`` program; every one returns a module whose forward gives logits."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.workload.offline import ensure_offline
from edgewise.nn.workload.spec import ModelSpec, Workload

__all__ = ["Exported", "Logits", "build_network", "unwrap"]


class Logits(nn.Module):
    """Makes any classifier's forward return a logits tensor: transformers' output objects
    (``.logits``), tuples (first item) and dicts (``"logits"``) are unwrapped. ``input_name``
    passes the input by keyword (``pixel_values``) where the inner model wants that."""

    def __init__(self, inner: nn.Module, input_name: str | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.input_name = input_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(**{self.input_name: x}) if self.input_name else self.inner(x)
        if isinstance(out, torch.Tensor):
            return out
        if isinstance(out, Mapping) and "logits" in out:
            out = out["logits"]
        elif hasattr(out, "logits"):
            out = out.logits
        elif isinstance(out, tuple | list) and out:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the model returned {type(out).__name__}, not a logits tensor")
        return out


class Exported(Logits):
    """A ``torch.export`` program's module: inference only (it has no training mode)."""

    def train(self, mode: bool = True) -> Exported:
        if mode:
            raise ConfigError("an export: program is for inference only", field="model")
        self.training = False
        return self


def unwrap(module: nn.Module) -> nn.Module:
    """The user's own module inside a :class:`Logits` wrapper (whose names weights use)."""
    return module.inner if isinstance(module, Logits) else module


def build_network(workload: Workload, *, seed: int = 0, num_classes: int | None = None,
                  input_shape: tuple[int, ...] | None = None) -> nn.Module:
    """The workload's model, randomly initialised from ``seed`` (weights are loaded
    separately). ``num_classes`` and ``input_shape`` fill a transformers config's
    ``num_labels``, ``image_size`` and ``num_channels`` where its arguments leave them out."""
    spec = workload.model
    torch.manual_seed(seed)
    if spec.kind == "export":
        from edgewise.nn.workload.exported import load_export

        return Exported(load_export(Path(spec.ref)).module()).eval()
    if spec.kind == "builtin":
        model = _builtin(spec, num_classes)
    elif spec.kind == "hf":
        model = _hf(spec, num_classes, input_shape)
    else:
        model = Logits(_py(spec))
    if spec.batchnorm_momentum is not None:
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.momentum = spec.batchnorm_momentum
    return model


def _builtin(spec: ModelSpec, num_classes: int | None) -> nn.Module:
    if spec.ref == "digits-cnn":
        from edgewise.nn.models import DigitsCNN

        args = {"n_classes": num_classes or 10, **spec.args}
        try:
            return DigitsCNN(**args)
        except TypeError as exc:
            raise ConfigError(f"digits-cnn: {exc}", field="model_args") from None
    from edgewise.nn import zoo

    ensure_offline()
    model, _ = zoo.build(spec.ref)
    name = getattr(model, "main_input_name", None)
    return Logits(model, name if isinstance(name, str) else None)


_HF_LOCK = threading.Lock()
"""transformers resolves its names lazily, importing a model's modules on first use; one
member's threads (its calls and concurrency groups) take that first use one at a time."""


def _hf(spec: ModelSpec, num_classes: int | None,
        input_shape: tuple[int, ...] | None) -> nn.Module:
    with _HF_LOCK:
        return _hf_built(spec, num_classes, input_shape)


def _found(value: object) -> str:
    """What a name of transformers resolved to, for an error message."""
    if value is None:
        return "nothing"
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)!s}"


def _hf_built(spec: ModelSpec, num_classes: int | None,
              input_shape: tuple[int, ...] | None) -> nn.Module:
    ensure_offline()
    import transformers

    config_cls = getattr(transformers, spec.ref, None)
    if not (isinstance(config_cls, type) and
            issubclass(config_cls, transformers.PretrainedConfig)):
        # a name transformers lists but whose backend it found missing resolves to a
        # placeholder class: say what it resolved to (seen once on a testbed device)
        detail = "" if config_cls is None else f" (it resolves to {_found(config_cls)})"
        raise ConfigError(f"transformers has no config class {spec.ref!r}{detail}",
                          field="model")
    try:
        config = config_cls(**spec.args)
    except Exception as exc:  # transformers validates arguments with its own error types
        first = str(exc).strip().splitlines()[-1].strip()
        raise ConfigError(f"{spec.ref}: {first}", field="model_args") from None
    _fill(config, spec.args, num_classes, input_shape)
    auto = (transformers.AutoModelForImageClassification,
            transformers.AutoModelForSequenceClassification)
    for factory in auto:
        try:
            model = factory.from_config(config)  # type: ignore[no-untyped-call]
        except ValueError:
            continue
        except Exception as exc:  # a config the model class cannot be built from
            first = str(exc).strip().splitlines()[-1].strip()
            raise ConfigError(f"{spec.ref}: {first}", field="model_args") from None
        return Logits(model, model.main_input_name)
    raise ConfigError(f"{spec.ref} has no image or sequence classification model in "
                      "transformers", field="model")


def _fill(config: Any, given: Mapping[str, Any], num_classes: int | None,
          input_shape: tuple[int, ...] | None) -> None:
    """Set what the task knows and the user left out: classes, image size and channels."""
    if num_classes is not None and "num_labels" not in given:
        config.num_labels = num_classes
    if input_shape is None or len(input_shape) != 3:
        return
    if "num_channels" not in given and hasattr(config, "num_channels"):
        config.num_channels = input_shape[0]
    if "image_size" not in given and hasattr(config, "image_size") and \
            input_shape[1] == input_shape[2]:
        config.image_size = input_shape[1]


def _py(spec: ModelSpec) -> nn.Module:
    """Import the user's module (dotted name or file) and call its factory with the args."""
    module_ref, _, factory_name = spec.ref.rpartition(":")
    try:
        if module_ref.endswith(".py"):
            module = _import_file(Path(module_ref))
        else:
            module = importlib.import_module(module_ref)
    except ConfigError:
        raise
    except Exception as exc:  # the user's module may fail in any way on import
        raise ConfigError(f"cannot import {module_ref}: {type(exc).__name__}: {exc}",
                          field="model") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ConfigError(f"{module_ref} has no callable {factory_name!r}", field="model")
    try:
        model = factory(**spec.args)
    except TypeError as exc:
        raise ConfigError(f"{factory_name}(): {exc}", field="model_args") from None
    if not isinstance(model, nn.Module):
        raise ConfigError(f"{factory_name}() returned {type(model).__name__}, not a "
                          "torch.nn.Module", field="model")
    return model


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"{path}: no such file", field="model")
    name = "edgewise_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ConfigError(f"{path}: not an importable Python file", field="model")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
