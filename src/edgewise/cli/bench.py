"""`edgewise bench ...`: reproduce headline experiments; `--json` prints one object."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgewise.cli.common import err, out, state_dir, user_errors, writable_folder

__all__ = ["app"]

app = typer.Typer(help="Benchmarks; each prints a table, or one JSON object with --json.",
                  no_args_is_help=True)


JsonOpt = typer.Option(False, "--json", help="print one JSON object on stdout")
QuickOpt = typer.Option(False, "--quick", help="fewer points per sweep")
PlotsOpt = typer.Option(None, help="folder for the PNG plots (default: state dir)")


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


def _with_bar(label: str, run: Callable[[Callable[[str, float], None]], dict[str, object]]
              ) -> dict[str, object]:
    """Run one benchmark behind a transient progress bar on stderr."""
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(label, total=1.0)
        return run(lambda msg, frac: bar.update(task, description=msg, completed=frac))


@app.command()
@user_errors
def runtime(
    as_json: bool = JsonOpt,
    cluster: Path = typer.Option(None, help="cluster with three identical workers "
                                 "(default: examples/three-nanos.yaml)"),
    epochs: int = typer.Option(8, min=1, max=100),
    seed: int = typer.Option(0),
) -> None:
    """Real training on the emulated cluster: accuracy, parameter-server scaling, transport."""
    from edgewise.runtime.bench import DEFAULT_CLUSTER, run_runtime_bench

    cluster = cluster or DEFAULT_CLUSTER
    with err.status("benchmarking the runtime") as status:
        figures = run_runtime_bench(cluster, epochs=epochs, seed=seed,
                                    progress=lambda msg: status.update(msg))
    _emit(figures, as_json, "edgewise bench runtime")


@app.command("deep-edge")
@user_errors
def deep_edge(
    as_json: bool = JsonOpt,
    experiments: int = typer.Option(120, min=1, max=10000),
    seed: int = typer.Option(0),
    fit_budget: float = typer.Option(6.0, min=0.5, help="AutoML seconds per learned function"),
    histogram: Path = typer.Option(None, help="speedup histogram PNG (default: state dir)"),
) -> None:
    """Deep-Edge §V-C: deep-edge vs fair on random testbed experiments, gap to the exact
    oracle, solver time, model MAPE."""
    from edgewise.update.bench import run_deep_edge_bench

    png = histogram or state_dir() / "bench" / "deep-edge-speedup.png"
    writable_folder(png.parent, "--histogram")
    figures = _with_bar("deep-edge", lambda progress: run_deep_edge_bench(
        experiments=experiments, seed=seed, fit_budget_s=fit_budget, histogram=png,
        progress=progress))
    _emit(figures, as_json, "edgewise bench deep-edge")


@app.command()
@user_errors
def seifer(
    as_json: bool = JsonOpt,
    trials: int = typer.Option(50, min=1, max=10000, help="trials per node count"),
    seed: int = typer.Option(0),
    quick: bool = typer.Option(False, "--quick", help="5 trials per node count"),
) -> None:
    """SEIFER §6.1: partition-and-placement policies on random geometric clusters over the
    model zoo, approximation ratios, decision time, and a real pipeline on emulated links."""
    from edgewise.pipeline.bench import run_seifer_bench

    figures = _with_bar("seifer", lambda progress: run_seifer_bench(
        trials=trials, seed=seed, quick=quick, progress=progress))
    _emit(figures, as_json, "edgewise bench seifer")


ProblemBench = Callable[..., dict[str, object]]


def _problem_bench(name: str, runner: ProblemBench, *, as_json: bool, seed: int, quick: bool,
                   real: bool, plots: Path | None) -> None:
    """The shared body of `bench ekya|okita|srole`: one runner signature, one bar, one emit."""
    folder = writable_folder(plots or state_dir() / "bench" / name, "--plots")
    figures = _with_bar(name, lambda progress: runner(
        seed=seed, quick=quick, include_real=real, progress=progress, plots_dir=folder))
    _emit(figures, as_json, f"edgewise bench {name}")


@app.command()
@user_errors
def ekya(
    as_json: bool = JsonOpt, seed: int = typer.Option(0), quick: bool = QuickOpt,
    real: bool = typer.Option(True, "--real/--no-real",
                              help="include the micro-profiler and the real runtime"),
    plots: Path = PlotsOpt,
) -> None:
    """Ekya §6: thief vs uniform over streams and accelerators (trace-driven), capacity,
    factor analysis, Δ sensitivity, micro-profiler error, and real windows on digits."""
    from edgewise.continual.bench import run_ekya_bench

    _problem_bench("ekya", run_ekya_bench, as_json=as_json, seed=seed, quick=quick,
                   real=real, plots=plots)


@app.command()
@user_errors
def okita(
    as_json: bool = JsonOpt, seed: int = typer.Option(0), quick: bool = QuickOpt,
    real: bool = typer.Option(True, "--real/--no-real", help="include the real run on Ray"),
    plots: Path = PlotsOpt,
) -> None:
    """Okita §V: cost vs sites and jobs, sensitivity, latency functions, ratio to the
    offline optimum, running time, and a real run with migrations."""
    from edgewise.sites.bench import run_okita_bench

    _problem_bench("okita", run_okita_bench, as_json=as_json, seed=seed, quick=quick,
                   real=real, plots=plots)


@app.command()
@user_errors
def srole(
    as_json: bool = JsonOpt, seed: int = typer.Option(0), quick: bool = QuickOpt,
    real: bool = typer.Option(True, "--real/--no-real",
                              help="include real model-parallel training on Ray"),
    plots: Path = PlotsOpt,
    partitions: int | None = typer.Option(
        None, "--partitions", min=1, max=64,
        help="group each job's model levels into at most this many partitions "
             "(default: one partition per model level, §III)"),
) -> None:
    """SROLE §V: job completion time vs edges for three models, tasks per device,
    utilisation, shield overhead, collisions vs κ, and a real model-parallel placement."""
    from functools import partial

    from edgewise.modelparallel.bench import run_srole_bench

    _problem_bench("srole", partial(run_srole_bench, partitions=partitions), as_json=as_json,
                   seed=seed, quick=quick, real=real, plots=plots)
