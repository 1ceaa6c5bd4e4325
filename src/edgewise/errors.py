"""Errors a user can cause; the CLI prints them and exits 2 without a traceback."""

from __future__ import annotations

__all__ = ["ConfigError", "EdgewiseError", "InfeasibleError", "RuntimeFault"]


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
