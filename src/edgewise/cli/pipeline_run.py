"""`edgewise pipeline plan|run`: place a model on a cluster and run the pipeline for real."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from edgewise.cli.common import Address, err, out, user_errors
from edgewise.cluster.schema import cluster_from_dict, load_cluster
from edgewise.nn.chain_cache import cached_chain as zoo_chain
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.realrun import BENCH_CLUSTER, plan_bench_pipeline, run_bench_pipeline
from edgewise.pipeline.run import Dispatcher, Result
from edgewise.pipeline.sim import PipelineOutcome, simulate
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import connect

__all__ = ["outcome_json", "plan", "run", "run_pipeline"]

AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]


def outcome_json(problem: PipelineProblem, outcome: PipelineOutcome) -> dict[str, Any]:
    """A simulated plan as JSON: cuts, node names, per-stage times, bottleneck, throughput
    bound, latency, and the policy's decision seconds."""
    p = outcome.plan
    return {"policy": outcome.policy, "partitions": p.n_partitions, "cuts": list(p.cuts),
            "nodes": [problem.nodes[i] for i in p.nodes],
            "transfer_s": list(outcome.transfer_s), "compute_s": list(outcome.compute_s),
            "return_s": outcome.return_s, "memory_bytes": list(outcome.memory_bytes),
            "bottleneck_s": outcome.bottleneck_s, "throughput_rps": outcome.throughput_rps,
            "latency_s": outcome.latency_s, "timings": dict(outcome.timings)}


def _plan_table(problem: PipelineProblem, outcomes: list[PipelineOutcome]) -> Table:
    table = Table(title=f"{problem.chain.name} on {len(problem.nodes)} nodes "
                        f"({problem.chain.n_segments} segments)")
    for col in ("policy", "partitions", "cuts", "nodes", "bottleneck ms", "throughput bound /s",
                "latency ms"):
        table.add_column(col, justify="left" if col in ("policy", "cuts", "nodes") else "right")
    for o in outcomes:
        p = o.plan
        table.add_row(o.policy, str(p.n_partitions), " ".join(map(str, p.cuts)),
                      " ".join(problem.nodes[i] for i in p.nodes), f"{o.bottleneck_s * 1e3:.2f}",
                      f"{o.throughput_rps:.1f}" if o.bottleneck_s > 0 else "unbounded",
                      f"{o.latency_s * 1e3:.2f}")
    return table


@user_errors
def plan(model: str = typer.Argument(..., help="a zoo model (edgewise pipeline analyze)"),
         nodes: int = typer.Option(10, min=1, max=200, help="random geometric cluster size"),
         memory_mb: float = typer.Option(128.0, min=1.0, help="memory of every node, MB"),
         seed: int = typer.Option(0),
         paper_scoring: bool = typer.Option(
             False, help="score only the transfers between compute partitions, as the "
             "paper's §6.1 simulations (default: the dispatcher's input transfer too)"),
         as_json: AsJson = False) -> None:
    """Plan MODEL on a random SEIFER cluster (§6.1) with every policy; compare bottlenecks."""
    rng = np.random.default_rng(seed)
    problem = random_instance(nodes, zoo_chain(model), rng, memory_mb=(memory_mb, memory_mb))
    problem = dataclasses.replace(problem, dispatcher_transfer=not paper_scoring)
    names = ["seifer", "joint-greedy", "bottleneck-search", "random"]
    names += ["exact"] if nodes <= 6 else []
    outcomes = [simulate(problem, n, seed=seed) for n in names]
    if as_json:
        print(json.dumps({"model": model, "nodes": list(problem.nodes),
                          "dispatcher_transfer": problem.dispatcher_transfer,
                          "plans": [outcome_json(problem, o) for o in outcomes]}))
        return
    out.print(_plan_table(problem, outcomes))


def _killer(kill_stage: int, after: int, devices: list[str], quiet: bool) -> Any:
    """An ``on_result`` hook that kills stage ``kill_stage`` once request ``after`` is back."""
    state = {"killed": False}

    def on_result(dispatcher: Dispatcher, result: Result) -> None:
        if 0 <= kill_stage < len(devices) and not state["killed"] and \
                result.request_id >= after:
            state["killed"] = True
            FaultInjector().kill(dispatcher.stage_names[kill_stage])
            if not quiet:
                err.print(f"[red]killed stage {kill_stage}[/] on {devices[kill_stage]}")

    return on_result


@user_errors
def run(requests: int = typer.Option(60, min=1, max=100000),
        kill_stage: int = typer.Option(-1, help="kill this stage after a sixth of the requests"),
        seed: int = typer.Option(0),
        cluster: Path | None = typer.Option(
            None, help="cluster YAML whose manager dispatches and whose other devices host "
                       "the stages (default: the shipped seifer-bench.yaml)"),
        address: str = Address, as_json: AsJson = False) -> None:
    """Place a CNN with bottleneck-search on four Jetson Nanos behind slow links (emulated,
    or the cluster at --address), stream REQUESTS images through the pipeline and compare
    the throughput with the plan's bound."""
    run_pipeline(requests, kill_stage, seed, cluster, address or None, as_json)


def run_pipeline(requests: int = 60, kill_stage: int = -1, seed: int = 0,
                 cluster: Path | None = None, address: str | None = None,
                 as_json: bool = False) -> None:
    """`pipeline run` (and the demo's part): plan, stream, kill a stage, report."""
    devices = (load_cluster(cluster) if cluster is not None
               else cluster_from_dict(BENCH_CLUSTER, source="pipeline-run"))
    planned = plan_bench_pipeline(devices, seed)
    if not as_json:
        out.print(_plan_table(planned.problem, [planned.outcome]))
    runtime = connect(devices, address)
    try:
        done = run_bench_pipeline(runtime, planned, seed, requests, on_result=_killer(
            kill_stage, requests // 6, planned.devices, as_json))
    finally:
        runtime.shutdown()
    outcome, ran = done.outcome, done.run
    figures = {"plan": outcome_json(done.problem, outcome), "requests": requests,
               "results": len(ran.outputs), "in_order": ran.request_ids == list(range(
                   len(ran.outputs))), "outputs_equal_to_the_model": done.outputs_correct,
               "restarts": ran.restarts, "resends": ran.resends,
               "duplicates": ran.duplicates, "time_dilation": runtime.time_dilation,
               "timings": {"throughput_rps": ran.throughput_rps,
                           "latency_p50_s": ran.latency_p50_s, "seconds": ran.seconds}}
    if as_json:
        print(json.dumps(figures))
        return
    rate = ran.throughput_rps * runtime.time_dilation
    out.print(f"{len(ran.outputs)} of {requests} results, in order, "
              f"{'equal to' if done.outputs_correct else 'DIFFERENT from'} the unpartitioned "
              f"model; throughput {rate:.1f}/s vs bound {outcome.throughput_rps:.1f}/s"
              f"{_dilated(runtime.time_dilation)}; restarts {ran.restarts}, re-sent "
              f"{ran.resends}, duplicates dropped {ran.duplicates}")


def _dilated(dilation: float) -> str:
    return "" if dilation == 1.0 else f" (in device time: measured ÷ time dilation {dilation:.2f})"
