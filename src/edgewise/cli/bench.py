"""`edgewise bench ...`: reproduce headline experiments; `--json` prints one object."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgewise.cli.common import err, out, state_dir, user_errors
from edgewise.runtime.bench import DEFAULT_CLUSTER, run_runtime_bench

__all__ = ["app"]

app = typer.Typer(help="Benchmarks; each prints a table, or one JSON object with --json.",
                  no_args_is_help=True)


def _emit(figures: dict[str, object], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(figures))
        return
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    out.print(table)


@app.command()
@user_errors
def runtime(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    cluster: Path = typer.Option(DEFAULT_CLUSTER, help="cluster with three identical workers"),
    epochs: int = typer.Option(8, min=1, max=100),
    seed: int = typer.Option(0),
) -> None:
    """Real training on the emulated cluster: accuracy, parameter-server scaling, transport."""
    with err.status("benchmarking the runtime") as status:
        figures = run_runtime_bench(cluster, epochs=epochs, seed=seed,
                                    progress=lambda msg: status.update(msg))
    _emit(figures, as_json, "edgewise bench runtime")


@app.command("deep-edge")
@user_errors
def deep_edge(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    experiments: int = typer.Option(120, min=1, max=10000),
    seed: int = typer.Option(0),
    fit_budget: float = typer.Option(6.0, min=0.5, help="AutoML seconds per learned function"),
    histogram: Path = typer.Option(None, help="speedup histogram PNG (default: state dir)"),
) -> None:
    """Deep-Edge §V-C: deep-edge vs fair on random testbed experiments, gap to the exact
    oracle, solver time, model MAPE."""
    from edgewise.update.bench import run_deep_edge_bench

    png = histogram or state_dir() / "bench" / "deep-edge-speedup.png"
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task("deep-edge", total=1.0)
        figures = run_deep_edge_bench(
            experiments=experiments, seed=seed, fit_budget_s=fit_budget, histogram=png,
            progress=lambda msg, frac: bar.update(task, description=msg, completed=frac))
    _emit(figures, as_json, "edgewise bench deep-edge")


@app.command()
@user_errors
def seifer(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    trials: int = typer.Option(50, min=1, max=10000, help="trials per node count"),
    seed: int = typer.Option(0),
    quick: bool = typer.Option(False, "--quick", help="5 trials per node count"),
) -> None:
    """SEIFER §6.1: partition-and-placement policies on random geometric clusters over the
    model zoo, approximation ratios, decision time, and a real pipeline on emulated links."""
    from edgewise.pipeline.bench import run_seifer_bench

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task("seifer", total=1.0)
        figures = run_seifer_bench(
            trials=trials, seed=seed, quick=quick,
            progress=lambda msg, frac: bar.update(task, description=msg, completed=frac))
    _emit(figures, as_json, "edgewise bench seifer")


def _with_bar(label: str, run: Callable[[Callable[[str, float], None]], dict[str, object]]
              ) -> dict[str, object]:
    """Run one benchmark behind a transient progress bar on stderr."""
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(label, total=1.0)
        return run(lambda msg, frac: bar.update(task, description=msg, completed=frac))


def _plots(path: Path | None, name: str) -> Path:
    return path or state_dir() / "bench" / name


@app.command()
@user_errors
def ekya(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    seed: int = typer.Option(0),
    quick: bool = typer.Option(False, "--quick", help="fewer points per sweep"),
    real: bool = typer.Option(True, "--real/--no-real",
                              help="include the micro-profiler and the real runtime"),
    plots: Path = typer.Option(None, help="folder for the PNG plots (default: state dir)"),
) -> None:
    """Ekya §6: thief vs uniform over streams and accelerators (trace-driven), capacity,
    factor analysis, Δ sensitivity, micro-profiler error, and real windows on digits."""
    from edgewise.continual.bench import run_ekya_bench

    folder = _plots(plots, "ekya")
    figures = _with_bar("ekya", lambda progress: run_ekya_bench(
        seed=seed, quick=quick, include_real=real, progress=progress, plot_dir=folder))
    _emit(figures, as_json, "edgewise bench ekya")


@app.command()
@user_errors
def okita(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    seed: int = typer.Option(0),
    quick: bool = typer.Option(False, "--quick", help="fewer points per sweep"),
    real: bool = typer.Option(True, "--real/--no-real", help="include the real run on Ray"),
    plots: Path = typer.Option(None, help="folder for the PNG plots (default: state dir)"),
) -> None:
    """Okita §V: cost vs sites and jobs, sensitivity, latency functions, ratio to the
    offline optimum, running time, and a real run with migrations."""
    from edgewise.sites.bench import run_okita_bench

    folder = _plots(plots, "okita")
    figures = _with_bar("okita", lambda progress: run_okita_bench(
        seed=seed, quick=quick, include_real=real, progress=progress, plots_dir=folder))
    _emit(figures, as_json, "edgewise bench okita")


@app.command()
@user_errors
def srole(
    as_json: bool = typer.Option(False, "--json", help="print one JSON object on stdout"),
    seed: int = typer.Option(0),
    quick: bool = typer.Option(False, "--quick", help="fewer points per sweep"),
    real: bool = typer.Option(True, "--real/--no-real",
                              help="include real model-parallel training on Ray"),
    plots: Path = typer.Option(None, help="folder for the PNG plots (default: state dir)"),
) -> None:
    """SROLE §V: job completion time vs edges for three models, tasks per device,
    utilisation, shield overhead, collisions vs κ, and a real model-parallel placement."""
    from edgewise.modelparallel.bench import run_srole_bench

    folder = _plots(plots, "srole")
    figures = _with_bar("srole", lambda progress: run_srole_bench(
        seed=seed, quick=quick, include_real=real, progress=progress, plots_dir=folder))
    _emit(figures, as_json, "edgewise bench srole")
