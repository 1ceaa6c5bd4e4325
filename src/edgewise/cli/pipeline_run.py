"""`edgewise pipeline plan|run`: place a model on a cluster and run the pipeline for real."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import numpy as np
import torch
import typer
from rich.table import Table

from edgewise.cli.common import err, out, user_errors
from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.chain_cache import cached_chain as zoo_chain
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.realrun import BENCH_CLUSTER, bench_inputs, bench_model, bench_problem
from edgewise.pipeline.run import Dispatcher, Result, execute
from edgewise.pipeline.sim import PipelineOutcome, simulate
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import start_local
from edgewise.wire.activation import ActivationCodec

__all__ = ["outcome_json", "plan", "run"]

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
        seed: int = typer.Option(0), as_json: AsJson = False) -> None:
    """Place a CNN with bottleneck-search on four emulated Jetson Nanos behind slow links,
    stream REQUESTS images through the pipeline and compare the throughput with the plan's
    bound."""
    cluster = cluster_from_dict(BENCH_CLUSTER, source="pipeline-run")
    model = bench_model(seed)
    problem = bench_problem(cluster, model)
    outcome = simulate(problem, "bottleneck-search", seed=seed)
    if not as_json:
        out.print(_plan_table(problem, [outcome]))
    devices = [problem.nodes[i] for i in outcome.plan.nodes]
    inputs = bench_inputs(requests, seed)
    runtime = start_local(cluster)
    try:
        done = execute(runtime, problem, outcome.plan, model=model, inputs=inputs,
                       on_result=_killer(kill_stage, requests // 6, devices, as_json),
                       codec=ActivationCodec("none"))
    finally:
        runtime.shutdown()
    with torch.no_grad():
        reference = model(torch.from_numpy(np.concatenate(inputs))).numpy()
    exact = bool(np.allclose(np.concatenate(done.outputs), reference, atol=1e-5))
    figures = {"plan": outcome_json(problem, outcome), "requests": requests,
               "results": len(done.outputs), "in_order": done.request_ids == list(range(
                   len(done.outputs))), "outputs_equal_to_the_model": exact,
               "restarts": done.restarts, "resends": done.resends,
               "duplicates": done.duplicates,
               "timings": {"throughput_rps": done.throughput_rps,
                           "latency_p50_s": done.latency_p50_s, "seconds": done.seconds}}
    if as_json:
        print(json.dumps(figures))
        return
    out.print(f"{len(done.outputs)} of {requests} results, in order, "
              f"{'equal to' if exact else 'DIFFERENT from'} the unpartitioned model; "
              f"throughput {done.throughput_rps:.1f}/s vs bound {outcome.throughput_rps:.1f}/s; "
              f"restarts {done.restarts}, re-sent {done.resends}, duplicates dropped "
              f"{done.duplicates}")
