"""What every command shares: consoles, error handling, the state directory."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from edgewise.errors import EdgewiseError

__all__ = ["err", "out", "state_dir", "user_errors"]

out = Console()
err = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Print an EdgewiseError (bad input, infeasible request) and exit 2, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except EdgewiseError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper


def state_dir() -> Path:
    """Where strikes, checkpoints and run records live (``EDGEWISE_STATE_DIR`` overrides)."""
    base = os.environ.get("EDGEWISE_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME", str(Path.home() / ".local" / "state"))
    return Path(xdg) / "edgewise"
