"""Weights from and to local safetensors files, loaded strictly; nothing is ever unpickled."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_model
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.workload.modelbuild import unwrap

__all__ = ["load_weights", "save_weights"]

_SHOW = 6


def _names(label: str, names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:_SHOW])
    more = f" and {len(names) - _SHOW} more" if len(names) > _SHOW else ""
    return f"{label} {len(names)}: {shown}{more}"


def load_weights(model: nn.Module, path: Path) -> None:
    """Load ``path`` into ``model`` (the user's module inside any wrapper), strictly.

    Raises
    ------
    ConfigError
        Field ``weights``: not a readable safetensors file, or names or shapes that do not
        fit the model (the message lists the missing and unexpected names).
    """
    path = Path(path)
    if path.suffix != ".safetensors":
        raise ConfigError(f"{path}: weights must be a .safetensors file (pickled checkpoints "
                          "are never loaded)", field="weights")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file", field="weights")
    target = unwrap(model)
    try:
        stored = load_file(path)
    except (SafetensorError, OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable safetensors file ({exc})",
                          field="weights") from None
    expected = target.state_dict()
    wrong = [f"{k} {tuple(v.shape)} vs {tuple(expected[k].shape)}"
             for k, v in stored.items() if k in expected and v.shape != expected[k].shape]
    if wrong:
        raise ConfigError(f"{path}: weights do not fit the model; {_names('shapes', wrong)}",
                          field="weights")
    with torch.no_grad():
        missing, unexpected = load_model(target, path, strict=False)
    if missing or unexpected:
        parts = [_names(label, list(names)) for label, names in
                 (("missing", missing), ("unexpected", unexpected)) if names]
        raise ConfigError(f"{path}: weights do not fit the model; {'; '.join(parts)}",
                          field="weights")


def save_weights(model: nn.Module, path: Path) -> Path:
    """Save the user's module inside ``model`` (shared tensors once) as safetensors."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(unwrap(model), str(path))
    return path
