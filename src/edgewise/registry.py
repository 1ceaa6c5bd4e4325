"""Registries of named policies: one decorator registers, one lookup finds (CODE_STYLE).

A policy is registered once, by the decorator on its own module; the registry finds those
modules itself (every module of the policies package), so no second list names them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from edgewise.errors import ConfigError

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., Any])
G = TypeVar("G", bound=Callable[..., Any])


class Registry(Generic[F]):
    """Named entries of one kind, registered by the modules of ``package``; a lookup first
    imports every module of that package (once), so it never misses an entry because its
    module was not imported yet."""

    def __init__(self, package: str, field: str = "policy") -> None:
        self.entries: dict[str, F] = {}
        self._package, self._field, self._loaded = package, field, False

    def register(self, name: str) -> Callable[[G], G]:
        """Decorator: add the function under ``name``; its own signature is kept."""

        def add(fn: G) -> G:
            if name in self.entries and self.entries[name] is not fn:
                raise ValueError(f"{self._field} {name!r} registered twice")
            self.entries[name] = fn  # type: ignore[assignment]
            return fn

        return add

    def load(self) -> dict[str, F]:
        """Import every module of the package (their decorators register); the entries."""
        if not self._loaded:
            package = importlib.import_module(self._package)
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{self._package}.{module.name}")
            self._loaded = True
        return self.entries

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self.load())

    def get(self, name: str) -> F:
        """The entry called ``name``; ConfigError names the field and lists the known ones."""
        entries = self.load()
        if name not in entries:
            raise ConfigError(f"unknown {self._field} {name!r}; known: {', '.join(self.names())}",
                              field=self._field)
        return entries[name]
