"""`edgewise pipeline scale`: a large transformer pipelined over a cluster's devices, each
stage holding only its slice (PipeEdge's setting)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from edgewise.cli.common import Address, out, user_errors
from edgewise.cli.pipeline_run import AsJson
from edgewise.cluster.schema import load_cluster
from edgewise.nn.large import LARGE
from edgewise.pipeline import (
    load_model,
    plan_on,
    random_inputs,
    run_json,
    serve,
    setup,
    whole_model_outputs,
)
from edgewise.runtime.ray_cluster import connect

__all__ = ["scale"]

_WEIGHTS = Path("~/.cache/edgewise/weights").expanduser()


def _fraction(value: object) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.2f}"


def _table(figures: dict[str, object]) -> Table:
    table = Table(title=f"{figures['policy']}: {figures['stages_used']} stages on "
                        f"{figures['devices']} devices (links: {figures['links']})")
    for col in ("stage", "device", "parameters", "busy computing", "busy sending",
                "peak MB", "device MB"):
        table.add_column(col, justify="left" if col == "device" else "right")
    stages = figures["stages"]
    assert isinstance(stages, list)
    for k, st in enumerate(stages):
        table.add_row(str(k), st["device"], f"{st['parameters']:,}",
                      _fraction(st["compute_busy_fraction"]), _fraction(st["link_busy_fraction"]),
                      f"{st['peak_memory_bytes'] / 2**20:.0f}",
                      f"{st['device_memory_bytes'] / 2**20:.0f}")
    bounds = figures["steady_span_results"]
    assert isinstance(bounds, list)
    results = f"results {bounds[0]}..{bounds[1]}"
    span = (f"steady span: {results}" if figures["steady_span_full"] else
            f"no steady span ({results}: {figures['requests']} requests are "
            f"fewer than 3 windows of {figures['window']}; these fractions are rough)")
    where = {st.get("peak_memory_source", "process") for st in stages}
    peak = "the larger of the stage's process and its node's cgroup" if "cgroup" in where \
        else "the stage's process"
    table.caption = (f"{span}; busy sending: the stage's outgoing link; the dispatcher's "
                     f"link {_fraction(figures.get('dispatcher_link_busy_fraction'))}; "
                     f"peak MB: {peak}")
    return table


@user_errors
def scale(cluster: Path = typer.Argument(..., help="cluster YAML (its manager dispatches)"),
          model: str = typer.Option("vit-large", help=f"one of {', '.join(LARGE)}"),
          policy: str = typer.Option("pipeedge", help="a registered pipeline policy"),
          devices: int = typer.Option(0, min=0, help="use the first N devices (0: all)"),
          requests: int = typer.Option(12, min=2, max=10_000),
          micro_batch: int = typer.Option(1, min=1, max=1024,
                                          help="inputs per request (a micro-batch)"),
          measure_links: bool = typer.Option(
              False, "--measure-links", help="probe every pair's rate first and plan with "
              "the measured rates instead of the cluster file's"),
          small: bool = typer.Option(False, help="a small model of the same class"),
          weights_dir: Path = typer.Option(_WEIGHTS, help="where the seeded weight shards "
                                                          "are written (reused)"),
          seed: int = typer.Option(0), address: str = Address, as_json: AsJson = False) -> None:
    """Pipeline a ViT-Large/Huge or BERT-Large (seeded random weights, stage-local loading)
    over CLUSTER's devices with POLICY; check every output against the whole model."""
    lm = load_model(model, weights_dir, scale="small" if small else "full", seed=seed,
                    micro_batch=micro_batch)
    inputs = random_inputs(lm.example, requests, seed)
    reference = whole_model_outputs(lm, inputs)
    runtime = connect(load_cluster(cluster), address or None)
    try:
        s = setup(runtime, lm, measure_links=measure_links)
        problem, plan = plan_on(s, devices or len(s.devices), policy, seed)
        figures = run_json(s, problem, plan, serve(runtime, lm, problem, plan, inputs,
                                                   reference))
    finally:
        runtime.shutdown()
    if as_json:
        print(json.dumps({"model": lm.spec.name, **figures}))
        return
    out.print(_table(figures))
    out.print(f"{figures['requests']} results, in order: {figures['in_order']}, duplicates "
              f"{figures['duplicates']}; largest difference to the whole model "
              f"{figures['outputs_max_abs_diff']:.3g}; steady throughput "
              f"{figures['steady_throughput_rps']}/s against the plan's "
              f"{figures['planned_throughput_rps']}/s ({figures['micro_batch']} inputs a "
              f"request); window {figures['window']}")
