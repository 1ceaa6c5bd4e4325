"""Registries of named policies: one decorator registers, one lookup finds (CODE_STYLE)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from edgewise.errors import ConfigError

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., Any])
G = TypeVar("G", bound=Callable[..., Any])


class Registry(Generic[F]):
    """Named entries of one kind; ``loader`` imports the modules whose decorators register
    them, so a lookup never misses an entry because its module was not imported yet."""

    def __init__(self, loader: Callable[[], None], field: str = "policy") -> None:
        self.entries: dict[str, F] = {}
        self._loader, self._field = loader, field

    def register(self, name: str) -> Callable[[G], G]:
        """Decorator: add the function under ``name``; its own signature is kept."""

        def add(fn: G) -> G:
            self.entries[name] = fn  # type: ignore[assignment]
            return fn

        return add

    def get(self, name: str) -> F:
        """The entry called ``name``; ConfigError names the field and lists the known ones."""
        self._loader()
        if name not in self.entries:
            known = ", ".join(sorted(self.entries))
            raise ConfigError(f"unknown {self._field} {name!r}; known: {known}",
                              field=self._field)
        return self.entries[name]
