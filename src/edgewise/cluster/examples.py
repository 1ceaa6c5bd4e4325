"""The example cluster files shipped with the package (``edgewise/examples``); a source
checkout also shows them as ``examples/`` at its root."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from edgewise.errors import ConfigError

__all__ = ["example_path", "examples_dir"]


def examples_dir() -> Path:
    """The folder of the shipped examples."""
    return Path(str(files("edgewise") / "examples"))


def example_path(name: str) -> Path:
    """The shipped example called ``name`` (e.g. ``"three-nanos.yaml"``); ConfigError if none."""
    path = examples_dir() / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in examples_dir().glob("*.yaml")))
        raise ConfigError(f"no shipped example {name!r}; known: {known}", field="example")
    return path
