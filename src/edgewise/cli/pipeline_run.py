"""`edgewise pipeline plan|run`: place a model on a cluster and run the pipeline for real."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import typer
from rich.table import Table

from edgewise.cli.common import err, out, user_errors
from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.chain_cache import cached_chain as zoo_chain
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.realrun import BENCH_CLUSTER, bench_model, bench_problem
from edgewise.pipeline.run import run_pipeline
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import start_local
from edgewise.wire.activation import ActivationCodec

__all__ = ["plan", "run"]


def _plan_table(problem: PipelineProblem, plans: dict[str, PipelinePlan]) -> Table:
    table = Table(title=f"{problem.chain.name} on {len(problem.nodes)} nodes "
                        f"({problem.chain.n_segments} segments)")
    for col in ("policy", "partitions", "cuts", "nodes", "bottleneck ms", "throughput bound /s"):
        table.add_column(col, justify="left" if col in ("policy", "cuts", "nodes") else "right")
    for name, p in plans.items():
        table.add_row(name, str(p.n_partitions), " ".join(map(str, p.cuts)),
                      " ".join(problem.nodes[i] for i in p.nodes), f"{p.bottleneck_s * 1e3:.2f}",
                      f"{1 / p.bottleneck_s:.1f}" if p.bottleneck_s > 0 else "unbounded")
    return table


@user_errors
def plan(model: str = typer.Argument(..., help="a zoo model (edgewise pipeline analyze)"),
         nodes: int = typer.Option(10, min=1, max=200, help="random geometric cluster size"),
         memory_mb: float = typer.Option(128.0, min=1.0, help="memory of every node, MB"),
         seed: int = typer.Option(0),
         paper_scoring: bool = typer.Option(
             False, help="score only the transfers between compute partitions, as the "
             "paper's §6.1 simulations (default: the dispatcher's input transfer too)")) -> None:
    """Plan MODEL on a random SEIFER cluster (§6.1) with every policy; compare bottlenecks."""
    rng = np.random.default_rng(seed)
    problem = random_instance(nodes, zoo_chain(model), rng, memory_mb=(memory_mb, memory_mb))
    problem = dataclasses.replace(problem, dispatcher_transfer=not paper_scoring)
    names = ["seifer", "joint-greedy", "bottleneck-dp", "random"]
    names += ["exact"] if nodes <= 6 else []
    plans = {n: get_policy(n)(problem, np.random.default_rng(seed)) for n in names}
    out.print(_plan_table(problem, plans))


@user_errors
def run(requests: int = typer.Option(60, min=1, max=100000),
        kill_stage: int = typer.Option(-1, help="kill this stage after a sixth of the requests"),
        seed: int = typer.Option(0)) -> None:
    """Place a CNN with bottleneck-dp on four emulated Jetson Nanos behind slow links, stream
    REQUESTS images through the pipeline and compare the throughput with the plan's bound."""
    cluster = cluster_from_dict(BENCH_CLUSTER, source="pipeline-run")
    model = bench_model(seed)
    problem = bench_problem(cluster, model)
    plan_ = get_policy("bottleneck-dp")(problem, np.random.default_rng(seed))
    out.print(_plan_table(problem, {"bottleneck-dp": plan_}))
    devices = [problem.nodes[i] for i in plan_.nodes]
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((1, 3, 64, 64)).astype(np.float32) for _ in range(requests)]
    state = {"killed": False}

    def on_result(dispatcher: object, result: object) -> None:
        if 0 <= kill_stage < len(devices) and not state["killed"] and \
                getattr(result, "request_id", 0) >= requests // 6:
            state["killed"] = True
            FaultInjector().kill(dispatcher.stage_names[kill_stage])  # type: ignore[attr-defined]
            err.print(f"[red]killed stage {kill_stage}[/] on {devices[kill_stage]}")

    runtime = start_local(cluster)
    try:
        done = run_pipeline(runtime, model, devices, plan_.cuts, inputs, on_result=on_result,
                            dispatcher_device="dispatcher", codec=ActivationCodec("none"))
    finally:
        runtime.shutdown()
    with torch.no_grad():
        reference = model(torch.from_numpy(np.concatenate(inputs))).numpy()
    exact = np.allclose(np.concatenate(done.outputs), reference, atol=1e-5)
    out.print(f"{len(done.outputs)} of {requests} results, in order, "
              f"{'equal to' if exact else 'DIFFERENT from'} the unpartitioned model; "
              f"throughput {done.throughput_rps:.1f}/s vs bound {1 / plan_.bottleneck_s:.1f}/s; "
              f"restarts {done.restarts}, re-sent {done.resends}, duplicates dropped "
              f"{done.duplicates}")
