"""A disk cache of traced zoo chains: tracing the whole zoo takes about 30 s of CPU."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

from edgewise.errors import EdgewiseError
from edgewise.nn.chain import ModelChain
from edgewise.nn.sklearn_cache import cache_root

__all__ = ["cache_dir", "cache_key", "cached_chain"]

_SOURCES = ("zoo.py", "graph.py")
_LIBRARIES = ("torch", "transformers")


def cache_dir() -> Path:
    """``$EDGEWISE_CACHE_DIR/chains``, else ``~/.cache/edgewise/chains``."""
    return cache_root() / "chains"


def _version(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def cache_key(name: str, dtype_bytes: int) -> str:
    """A key that changes with the model, the dtype, the library versions and the source of
    the zoo and the graph analysis, so a stale chain is never read."""
    digest = hashlib.sha256(f"{name}|{dtype_bytes}".encode())
    for library in _LIBRARIES:
        digest.update(f"|{library}={_version(library)}".encode())
    here = Path(__file__).parent
    for source in _SOURCES:
        digest.update((here / source).read_bytes())
    return f"{name}-{digest.hexdigest()[:16]}"


def _from_json(data: dict[str, Any]) -> ModelChain:
    return ModelChain(
        name=str(data["name"]), input_bytes=int(data["input_bytes"]),
        output_bytes=tuple(int(x) for x in data["output_bytes"]),
        memory_bytes=tuple(int(x) for x in data["memory_bytes"]),
        flops=tuple(float(x) for x in data["flops"]),
        labels=tuple(str(x) for x in data["labels"]))


def cached_chain(name: str, dtype_bytes: int = 4, directory: Path | None = None) -> ModelChain:
    """:func:`edgewise.nn.zoo.chain`, read from the cache when a chain traced by the same
    code and libraries is there, else traced and stored. An unreadable cache entry is traced
    again; a cache that cannot be written is skipped."""
    folder = directory or cache_dir()
    path = folder / f"{cache_key(name, dtype_bytes)}.json"
    try:
        return _from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, EdgewiseError):
        pass
    from edgewise.nn.zoo import chain

    traced = chain(name, dtype_bytes)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(dataclasses.asdict(traced)))
        partial.replace(path)
    except OSError:
        pass
    return traced
