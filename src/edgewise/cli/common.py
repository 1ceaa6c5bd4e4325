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

from edgewise.errors import ConfigError, EdgewiseError

__all__ = ["Address", "err", "out", "state_dir", "user_errors", "writable_folder"]

out = Console()
err = Console(stderr=True)

Address = typer.Option(
    "", "--address", envvar="EDGEWISE_RAY_ADDRESS", show_default=False,
    help="run on this Ray cluster (host:port, or auto inside `edgewise testbed exec`) "
         "after checking that every device of the cluster registered; default: emulate "
         "the cluster on this host")
"""The option of every command that runs work (``runtime.ray_cluster.connect``)."""

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Print an EdgewiseError (bad input, infeasible request) and exit 2, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except EdgewiseError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper


def writable_folder(folder: Path, field: str) -> Path:
    """``folder``, created if need be; a ConfigError naming ``field`` before any work is done
    if it cannot be written (a long job must not fail at its last step)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {folder}: {exc.strerror}", field=field) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write to {folder}", field=field)
    return folder


def state_dir() -> Path:
    """Where strikes, checkpoints and run records live (``EDGEWISE_STATE_DIR`` overrides)."""
    base = os.environ.get("EDGEWISE_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME", str(Path.home() / ".local" / "state"))
    return Path(xdg) / "edgewise"
