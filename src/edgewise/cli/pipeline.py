"""`edgewise pipeline ...`: partitioned inference (SEIFER) — where a model can be cut."""

from __future__ import annotations

import json
from itertools import accumulate
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from torch import nn

from edgewise.cli import pipeline_run, pipeline_scale
from edgewise.cli.common import out, user_errors
from edgewise.cli.pipeline_run import ModelArg, ModelOpt, pick_model
from edgewise.cli.tables import print_fitted
from edgewise.cli.workload_opts import (
    ClassesOpt,
    InputShapeOpt,
    ModelArgOpt,
    WeightsOpt,
    WorkloadFileOpt,
    workload_from_cli,
)
from edgewise.nn.graph import (
    Example,
    candidate_points,
    explain_no_candidates,
    layer_dag,
    to_chain,
    topological_depth,
)
from edgewise.pipeline import model_and_example

__all__ = ["app"]

app = typer.Typer(help="Partitioned inference (SEIFER): cut any model, place it, serve it.",
                  no_args_is_help=True)


def _rows(name: str, net: nn.Module, example: Example,
          dtype_bytes: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The candidate points of a model with depth, transfer size and cumulative memory."""
    dag = layer_dag(net, example, dtype_bytes)
    points, depth = candidate_points(dag), topological_depth(dag)
    chain = to_chain(name, dag, points)
    transfer = (chain.input_bytes, *chain.output_bytes)
    memory = (0, *accumulate(chain.memory_bytes))
    rows = [{"label": str(p), "depth": depth[p], "layer": str(dag.nodes[p]["layer"]),
             "transfer_bytes": transfer[i], "cumulative_memory_bytes": memory[i]}
            for i, p in enumerate(points)]
    head = {"model": name, "tracer": dag.graph["tracer"], "vertices": len(dag),
            "dtype_bytes": dtype_bytes, "explanation": explain_no_candidates(dag)}
    return head, rows


@app.command()
@user_errors
def analyze(
    model: str | None = ModelArg, model_opt: str | None = ModelOpt,
    args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
    input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
    workload: Path | None = WorkloadFileOpt,
    dtype_bytes: int = typer.Option(4, "--dtype-bytes", help="bytes per floating element"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """Trace MODEL and list its candidate partition points (SEIFER §3.1), with each point's
    topological depth, transfer size and the memory of everything up to it. MODEL is a zoo
    name, hf:<ConfigClass>, py:module:factory, py:FILE.py:factory or export:FILE.pt2."""
    spec = workload_from_cli(pick_model(model, model_opt), args=args, weights=weights,
                             input_shape=input_shape, classes=classes, workload=workload)
    net, example = model_and_example(spec)
    name = spec.label
    head, rows = _rows(name, net, example, dtype_bytes)
    if as_json:
        print(json.dumps({**head, "points": rows}, indent=2))
        return
    if head["explanation"]:
        out.print(f"[yellow]{escape(name)}: no candidate partition point inside the model:[/] "
                  f"{escape(head['explanation'])}")
        return
    table = Table(title=f"{name}: {len(rows)} candidate points ({head['tracer']}, "
                  f"{head['vertices']} vertices, batch 1, {dtype_bytes} B/element)")
    for col in ("#", "label", "layer", "depth", "transfer KB", "cumulative memory MB"):
        table.add_column(col, justify="left" if col in ("label", "layer") else "right")
    for i, r in enumerate(rows):
        table.add_row(str(i), escape(r["label"]), escape(r["layer"]), str(r["depth"]),
                      f"{r['transfer_bytes'] / 1e3:,.1f}",
                      f"{r['cumulative_memory_bytes'] / 1e6:,.2f}")
    print_fitted(table, out)


app.command("plan")(pipeline_run.plan)
app.command("run")(pipeline_run.run)
app.command("scale")(pipeline_scale.scale)
