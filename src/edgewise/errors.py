"""Errors a user can cause; the CLI prints them and exits 2 without a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "ConfigError", "EdgewiseError", "InfeasibleError", "RuntimeFault", "config_error", "field_path",
]


class EdgewiseError(Exception):
    """Base class of every error a user can cause (bad input, infeasible request)."""


class ConfigError(EdgewiseError):
    """A configuration file or value is invalid; names the file, the field and the problem."""

    def __init__(self, problem: str, *, source: str | None = None, field: str | None = None):
        self.problem = problem
        self.source = source
        self.field = field
        where = ": ".join(part for part in (source, field) if part)
        super().__init__(f"{where}: {problem}" if where else problem)


class InfeasibleError(EdgewiseError):
    """No plan satisfies the request's constraints (memory, deadlines, devices)."""


class RuntimeFault(EdgewiseError):
    """A job could not finish because of faults it could not recover from."""


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a path a user can find in the file: ``jobs[2].epochs``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def config_error(exc: ValidationError, source: str) -> ConfigError:
    """The first problem of a pydantic ValidationError as a ConfigError naming its field."""
    errors = exc.errors()
    first = errors[0]
    problem = str(first["msg"]).removeprefix("Value error, ")
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more problem(s))"
    return ConfigError(problem, source=source, field=field_path(first["loc"]))
