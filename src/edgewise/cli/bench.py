"""`edgewise bench NAME`: reproduce a headline experiment; `--json` prints one object.

Every benchmark is a ``BenchSpec`` run by the one driver (``edgewise.bench``); this module
builds one command per spec, with the kit's shared options and the spec's own.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgewise.anatomy import problems
from edgewise.bench import (
    INTERRUPTED,
    BenchOption,
    BenchSpec,
    Figures,
    load_object,
    run_bench,
)
from edgewise.cli.common import err, out, state_dir, user_errors, writable_folder
from edgewise.cli.stages import plain_progress
from edgewise.cli.tables import print_fitted

__all__ = ["BENCHES", "app", "emit"]

BENCHES: dict[str, str] = {
    "runtime": "edgewise.runtime.bench:SPEC",
    **{card.bench: card.bench_spec_ref for card in problems()},
    "testbed": "edgewise.suites.testbed:SPEC",
    "workloads": "edgewise.suites.workloads:SPEC",
    "manager": "edgewise.service.loadbench:SPEC",
    "time-to-accuracy": "edgewise.suites.time_to_accuracy:SPEC",
    "pipeline-scale": "edgewise.suites.pipeline_scale:SPEC",
}
"""Benchmark name → its spec (``"module:NAME"``); each problem's from its card."""

LISTING: dict[str, str] = {
    "runtime": "Real training on the emulated cluster: accuracy, parameter-server scaling, "
               "transport.",
    **{card.bench: card.bench_line for card in problems()},
    "testbed": "The kernel-enforced testbed (root): links, CPU quotas, Deep-Edge, SEIFER and "
               "parameter-server runs and node faults on it.",
    "manager": "The manager under hostile load: bad input, half-open crowds, a planning "
               "flood, a too-big workload, the jobs list, Ray's listeners, a job under 50 "
               "clients.",
    "workloads": "Your own model and data: MobileNetV2 through a Deep-Edge plan, engine "
                 "overhead, pipelined outputs, bad workloads refused.",
    "time-to-accuracy": "Time to accuracy: edgewise's loops under deep-edge and fair plans "
                        "against Ray Train's DDP and one device alone.",
    "pipeline-scale": "PipeEdge's setting on the testbed (root): ViT-Large/Huge over 16 "
                      "devices, every policy against PipeEdge's partitioner.",
}
"""One line per benchmark for ``edgewise bench --help``, so that listing them imports no
spec (specs import torch or Ray); the command's own help is its spec's title."""



def _real_command(name: str) -> Any:
    """The click command of benchmark ``name``, built from its spec (imported now)."""
    one = typer.Typer(add_completion=False)
    one.command(name)(command(load_object(BENCHES[name])))
    built = typer.main.get_command(one)
    built.name = name
    return built


class _Listed(typer.core.TyperCommand):
    """A benchmark as listed: its name and one line; called, it becomes the real command
    (the spec is imported only then)."""

    def real(self) -> Any:
        """The benchmark's real command, its spec imported (for its options)."""
        assert self.name is not None
        return _real_command(self.name)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        return self.real().make_context(info_name, args, parent=parent, **extra)


class _LazyBenches(typer.core.TyperGroup):
    """``edgewise bench NAME`` imports NAME's spec and no other; ``edgewise bench --help``
    imports none (the listing comes from LISTING)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(BENCHES)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in BENCHES:
            return None
        return _Listed(name=cmd_name, help=LISTING.get(cmd_name), short_help=LISTING.get(cmd_name))


app = typer.Typer(cls=_LazyBenches, no_args_is_help=True)


@app.callback()
def _benchmarks() -> None:
    """Benchmarks; each prints a table, or one JSON object with --json."""

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "path": Path, "bool": bool}


def emit(figures: Figures, as_json: bool, title: str) -> None:
    """One JSON object on stdout, or a table of the figures."""
    if as_json:
        print(json.dumps(figures))
        return
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    print_fitted(table, out)


@contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """While ``active``, everything written to file descriptor 1 (libraries print banners
    from C, e.g. HiGHS) goes to stderr, so that ``--json`` prints only the one object."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _with_bar(label: str, run: Callable[[Callable[[str, float], None]], Figures]) -> Figures:
    """Run one benchmark behind a transient progress bar on stderr, or, when stderr is not
    a terminal, with a plain progress line every little while (a log keeps them)."""
    if not err.is_terminal:
        return run(plain_progress(f"bench {label}"))
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(label, total=1.0)
        return run(lambda msg, frac: bar.update(task, description=msg, completed=frac))


def _own(option: BenchOption) -> inspect.Parameter:
    flag = "--" + option.name.replace("_", "-")
    if option.kind == "bool":  # a flag: --name, no --no-name
        return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                 default=typer.Option(bool(option.default), flag,
                                                      help=option.help))
    default = typer.Option(option.default, flag, help=option.help, min=option.minimum,
                           max=option.maximum)
    kind = _TYPES[option.kind]
    annotation = kind if option.default is not None else kind | None
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


def _shared(spec: BenchSpec) -> list[inspect.Parameter]:
    def param(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                 annotation=annotation)

    params = [param("as_json", bool, typer.Option(False, "--json",
                                                  help="print one JSON object on stdout")),
              param("seed", int, typer.Option(0, help="seed of every random draw"))]
    if spec.has_quick:
        params.append(param("quick", bool, typer.Option(False, "--quick",
                                                        help="fewer points per sweep")))
    if spec.real is not None and spec.simulated is not None:
        params.append(param("real", bool, typer.Option(
            True, "--real/--no-real", help="include the real runs on Ray")))
    if spec.plots is not None:
        params.append(param("plots", Path | None, typer.Option(
            None, help="folder for the PNG plots (default: the state dir)")))
    return params


def command(spec: BenchSpec) -> Callable[..., None]:
    """The Typer command of ``spec``: shared options, then the spec's own."""
    own = [o.name for o in spec.options]

    def run(**kwargs: Any) -> None:
        folder = None
        if spec.plots is not None:
            chosen = kwargs.get("plots") or state_dir() / "bench" / spec.name
            folder = writable_folder(chosen, "--plots")
        with _stdout_to_stderr(kwargs["as_json"]):
            figures = _with_bar(spec.name, lambda progress: run_bench(
                spec, seed=kwargs["seed"], quick=kwargs.get("quick", False),
                include_real=kwargs.get("real", True), plots_dir=folder,
                options={k: kwargs[k] for k in own}, progress=progress))
        emit(figures, kwargs["as_json"], f"edgewise bench {spec.name}")
        if figures.get(INTERRUPTED):  # what was measured is out; the run was not whole
            raise KeyboardInterrupt

    run.__signature__ = inspect.Signature([*_shared(spec), *map(_own, spec.options)])  # type: ignore[attr-defined]
    run.__doc__ = spec.title
    run.__name__ = spec.name.replace("-", "_")
    return user_errors(run)
