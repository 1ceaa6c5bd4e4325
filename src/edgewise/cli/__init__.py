"""`edgewise ...`: one sub-command group per problem (Typer + Rich).

The groups import torch, Ray, FLAML or FastAPI, which together take seconds. ``main``
therefore builds the root app with only the group or command named on the command line
(all of them for ``--help`` or an unknown name); ``edgewise.cli.app`` is the full app.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Sequence
from typing import Any

import typer

from edgewise import __version__
from edgewise.anatomy import problems

__all__ = ["GROUPS", "build_app", "main"]

GROUPS: dict[str, str] = {
    "cluster": "edgewise.cli.cluster",
    "bench": "edgewise.cli.bench",
    "fault": "edgewise.cli.fault",
    **{card.name: card.cli_module for card in problems()},
    "testbed": "edgewise.cli.testbed",
}
"""Sub-command groups: name → module with a ``typer.Typer`` named ``app``; one per problem
registered under the entry points ``edgewise.problems`` (their cards import nothing)."""

COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("edgewise.cli.train", "train_command"),
    "demo": ("edgewise.cli.demo", "demo"),
    "serve": ("edgewise.cli.serve", "serve"),
    "profile": ("edgewise.cli.profile", "profile"),
    "problems": ("edgewise.cli.problems", "problems_command"),
}
"""Top-level commands: name → (module, function)."""


def _version(value: bool) -> None:
    if value:
        print(f"edgewise {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """edgewise: where and how deep-learning work runs at the edge."""


def _listing(doc: str | None) -> str | None:
    """A docstring's first paragraph on one line: Typer's rich command listings keep the
    docstring's own line breaks, which the terminal then wraps again."""
    if not doc:
        return None
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _one_line_listings(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its groups a one-line ``short_help``."""
    for info in app.registered_commands:
        if info.short_help is None:
            info.short_help = _listing(info.help or inspect.getdoc(info.callback))
    for group in app.registered_groups:
        if group.typer_instance is not None:
            _one_line_listings(group.typer_instance)


def build_app(only: str | None = None) -> typer.Typer:
    """The root app with every group and command, or only the one called ``only``
    (``""``: none, for ``--version``)."""
    app = typer.Typer(
        help="edgewise: decide where and how deep-learning work runs on heterogeneous edge "
        "devices, then run it.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    app.callback()(_root)
    for name in GROUPS:
        if only in (None, name):
            app.add_typer(importlib.import_module(GROUPS[name]).app, name=name)
    for name, (module, function) in COMMANDS.items():
        if only in (None, name):
            app.command(name)(getattr(importlib.import_module(module), function))
    _one_line_listings(app)
    return app


def _called(argv: Sequence[str]) -> str | None:
    """The group or command named first on ``argv``, if it is a known one; ``""`` (none at
    all) for ``--version``."""
    for arg in argv:
        if arg in ("--help", "-h"):
            return None
        if arg == "--version":
            return ""
        if not arg.startswith("-"):
            return arg if arg in GROUPS or arg in COMMANDS else None
    return None


def __getattr__(name: str) -> Any:
    if name == "app":  # the full app, built once on first use
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The ``edgewise`` script. Ctrl-C while the groups import (seconds) exits 130 with
    one line, as it does once a command runs (``cli.common.user_errors``)."""
    try:
        app_ = build_app(_called(sys.argv[1:]))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    app_()
