"""`edgewise bench ...`: reproduce headline experiments; `--json` prints one object."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from edgewise.cli.common import err, out, user_errors
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
