"""``export:FILE.pt2``: a ``torch.export`` program, checked to hold no pickled payloads first.

``torch.export.load`` can unpickle: weights and constants saved as tensor subclasses go
through ``torch.load(weights_only=False)``, custom and opaque objects through the pickle
module, and the sample inputs through ``torch.load(weights_only=True)`` with a fallback to
``weights_only=False``. :func:`load_export` therefore reads the archive's JSON configs first
and refuses any pickled weight, constant or object, and while torch loads the archive it
forces ``weights_only=True`` on every ``torch.load`` call, so the sample inputs can only be
read by torch's restricted tensor unpickler and the full-pickle fallback cannot run.
"""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from edgewise.errors import ConfigError

__all__ = ["check_archive", "load_export"]

_LOCK = threading.Lock()
_PICKLED_PREFIXES = ("custom_obj_", "opaque_obj_")


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path}: {why}", field="model")


def check_archive(path: Path) -> None:
    """Raise ConfigError unless ``path`` is a .pt2 archive whose weights and constants are
    all raw tensor payloads (no pickled tensor subclasses, objects or legacy ``.pt`` files)."""
    if not path.is_file():
        raise _refuse(path, "no such file")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            configs = [n for n in names if n.endswith(("_weights_config.json",
                                                        "_constants_config.json"))]
            if not configs:
                raise _refuse(path, "not a torch.export archive of this torch version "
                              "(no weights config; re-save it with torch.export.save)")
            for name in configs:
                _check_config(path, name, json.loads(archive.read(name)))
    except (zipfile.BadZipFile, OSError, ValueError, KeyError) as exc:
        raise _refuse(path, f"not a readable torch.export archive ({exc})") from None


def _check_config(path: Path, name: str, config: Any) -> None:
    entries = config.get("config", {}) if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise _refuse(path, f"{name} is malformed")
    for fqn, meta in entries.items():
        pickled = not isinstance(meta, dict) or meta.get("use_pickle") or \
            str(meta.get("path_name", "")).startswith(_PICKLED_PREFIXES)
        if pickled:
            raise _refuse(path, f"{fqn!r} is stored pickled, and nothing is unpickled here")


@contextmanager
def _weights_only() -> Iterator[None]:
    """Every ``torch.load`` inside the block uses torch's restricted unpickler."""
    original = torch.load

    def restricted(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        return original(*args, **kwargs)

    with _LOCK:
        torch.load = restricted
        try:
            yield
        finally:
            torch.load = original


def load_export(path: Path) -> torch.export.ExportedProgram:
    """The exported program in ``path`` after :func:`check_archive`; ConfigError (field
    ``model``) if it cannot be loaded."""
    check_archive(path)
    try:
        with _weights_only():
            return torch.export.load(path)
    except Exception as exc:  # torch raises many kinds for a bad archive
        raise _refuse(path, f"cannot load the exported program: {exc}") from None
