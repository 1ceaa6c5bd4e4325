"""`edgewise pipeline plan|run`: place a model on a cluster and run the pipeline for real."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer
from rich.table import Table
from torch import nn

from edgewise.cli.common import Address, err, out, user_errors
from edgewise.cli.stages import stage
from edgewise.cli.tables import print_fitted
from edgewise.cli.workload_opts import (
    ClassesOpt,
    InputShapeOpt,
    ModelArgOpt,
    WeightsOpt,
    WorkloadFileOpt,
    workload_from_cli,
)
from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict, load_cluster
from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.chain_cache import cached_chain as zoo_chain
from edgewise.nn.split import split_sequential
from edgewise.nn.workload import Workload
from edgewise.nn.zoo import zoo_names
from edgewise.pipeline import (
    BENCH_CLUSTER,
    Dispatcher,
    OutputCheck,
    PipelineOutcome,
    PipelineProblem,
    PipelineRun,
    Result,
    Splitter,
    bench_model,
    bench_problem,
    compare_outputs,
    execute,
    folder_inputs,
    partitioned,
    random_inputs,
    random_instance,
    reference_outputs,
    simulate,
    workload_problem,
)
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import connect
from edgewise.wire.activation import ActivationCodec

__all__ = ["ModelArg", "ModelOpt", "outcome_json", "pick_model", "plan", "run", "run_pipeline",
           "verdict"]

AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]
ModelArg = typer.Argument(None, metavar="[MODEL]", help="a zoo model (" + ", ".join(zoo_names())
                          + "), hf:<ConfigClass>, py:module:factory, py:FILE.py:factory or "
                          "export:FILE.pt2")
ModelOpt = typer.Option(None, "--model", help="MODEL, as an option")
EXACT_ATOL = 1e-4  # one thread in a stage vs several in the reference: float rounding only
VACUOUS_ABS = 10 * EXACT_ATOL  # outputs this small leave the check nothing to tell apart


def pick_model(argument: str | None, option: str | None) -> str | None:
    """The model named by the argument or by ``--model`` (not both)."""
    if argument is not None and option is not None and argument != option:
        raise ConfigError("name the model once: as the argument or with --model",
                          field="--model")
    return argument if argument is not None else option


def spec_chain(spec: Workload, seed: int = 0) -> ModelChain:
    """The chain a plan cuts: a plain zoo name's from the chain cache, any other model's
    over its single-tensor candidate points (what `pipeline run` can serve)."""
    plain = spec.model.kind == "builtin" and spec.weights is None and not spec.model.args
    if plain and spec.model.ref in zoo_names():
        return zoo_chain(spec.model.ref)
    return partitioned(spec, seed)[1].chain


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
def plan(model: str | None = ModelArg, model_opt: str | None = ModelOpt,
         args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
         input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
         workload: Path | None = WorkloadFileOpt,
         nodes: int = typer.Option(10, min=1, max=200, help="random geometric cluster size"),
         memory_mb: float = typer.Option(128.0, min=1.0, help="memory of every node, MB"),
         seed: int = typer.Option(0),
         paper_scoring: bool = typer.Option(
             False, help="score only the transfers between compute partitions, as the "
             "paper's §6.1 simulations (default: the dispatcher's input transfer too)"),
         as_json: AsJson = False) -> None:
    """Plan MODEL on a random SEIFER cluster (§6.1) with every policy; compare bottlenecks."""
    spec = workload_from_cli(pick_model(model, model_opt), args=args, weights=weights,
                             input_shape=input_shape, classes=classes, workload=workload)
    rng = np.random.default_rng(seed)
    problem = random_instance(nodes, spec_chain(spec), rng, memory_mb=(memory_mb, memory_mb))
    problem = dataclasses.replace(problem, dispatcher_transfer=not paper_scoring)
    names = ["seifer", "joint-greedy", "bottleneck-search", "random"]
    names += ["exact"] if nodes <= 6 else []
    outcomes = [simulate(problem, n, seed=seed) for n in names]
    if as_json:
        print(json.dumps({"model": spec.label, "nodes": list(problem.nodes),
                          "dispatcher_transfer": problem.dispatcher_transfer,
                          "plans": [outcome_json(problem, o) for o in outcomes]}))
        return
    print_fitted(_plan_table(problem, outcomes), out)


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


@dataclasses.dataclass(frozen=True, slots=True)
class _Served:
    """What `run` serves: the model, its placement problem, how it is cut, a request."""

    model: nn.Module
    problem: PipelineProblem
    splitter: Splitter
    example: torch.Tensor


def _served(spec: Workload | None, cluster: Cluster, seed: int, min_stages: int) -> _Served:
    """The built-in bench CNN (no model named) or the named model, cut at its points."""
    if spec is None:
        model = bench_model(seed)
        return _Served(model, bench_problem(cluster, model), split_sequential,
                       torch.zeros(1, 3, 64, 64))
    net, pm, example = partitioned(spec, seed)
    return _Served(net, workload_problem(cluster, pm, min_stages=min_stages), pm.splitter,
                   example)


def _inputs(served: _Served, spec: Workload | None, folder: Path | None,
            requests: int | None, seed: int) -> list[np.ndarray[Any, Any]]:
    if folder is not None:
        return folder_inputs(folder, tuple(served.example.shape[1:]),
                             spec.data if spec else None, limit=requests or _MAX_IMAGES)
    return random_inputs(served.example, requests or (60 if spec is None else 8), seed)


_MAX_IMAGES = 64


@user_errors
def run(model: str | None = ModelArg, model_opt: str | None = ModelOpt,
        args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
        input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
        workload: Path | None = WorkloadFileOpt,
        inputs: Path | None = typer.Option(
            None, "--inputs", help="a folder of images (sub-folders too), decoded with Pillow "
            "to the model's input shape; default: random inputs from --seed"),
        requests: int | None = typer.Option(
            None, min=1, max=100000, help="requests to stream (default: 60 for the built-in "
            f"CNN, 8 for a model, the images in --inputs up to {_MAX_IMAGES})"),
        compression: str = typer.Option(
            "none", help="activations on the wire: none (raw), lz4 (lossless) or zfp"),
        tolerance: float = typer.Option(1e-3, help="ZFP's absolute error bound per hop"),
        min_stages: int = typer.Option(
            3, min=1, max=4, help="with a model: each node offers just under 1/(N-1) of its "
            "memory, so that no plan has fewer than N stages"),
        kill_stage: int = typer.Option(-1, help="kill this stage after a sixth of the requests"),
        cluster: Path | None = typer.Option(
            None, help="cluster YAML whose manager dispatches and whose other devices host "
                       "the stages (default: the shipped seifer-bench.yaml)"),
        seed: int = typer.Option(0), address: str = Address, as_json: AsJson = False) -> None:
    """Place MODEL (default: a small CNN) with bottleneck-search on four Jetson Nanos behind
    slow links (emulated, or the cluster at --address, e.g. a testbed), stream requests
    through the pipeline, check the outputs against the unpartitioned model and compare the
    throughput with the plan's bound."""
    codec = ActivationCodec(compression, tolerance)  # type: ignore[arg-type]
    name = pick_model(model, model_opt)
    spec = None if name is None and workload is None else workload_from_cli(
        name, args=args, weights=weights, input_shape=input_shape, classes=classes,
        workload=workload)
    run_pipeline(spec, cluster, address or None, inputs=inputs, requests=requests,
                 codec=codec, min_stages=min_stages, kill_stage=kill_stage, seed=seed,
                 as_json=as_json)


def run_pipeline(spec: Workload | None = None, cluster_file: Path | None = None,
                 address: str | None = None, *, inputs: Path | None = None,
                 requests: int | None = None, codec: ActivationCodec | None = None,
                 min_stages: int = 3, kill_stage: int = -1, seed: int = 0,
                 as_json: bool = False) -> dict[str, Any]:
    """`pipeline run` (and the demo's part): plan, stream, check, report; the figures."""
    codec = codec or ActivationCodec("none")
    cluster = (load_cluster(cluster_file) if cluster_file is not None
               else cluster_from_dict(BENCH_CLUSTER, source="pipeline-run"))
    served = _served(spec, cluster, seed, min_stages)
    problem = served.problem
    outcome = simulate(problem, "bottleneck-search", seed=seed)
    if not as_json:
        print_fitted(_plan_table(problem, [outcome]), out)
    devices = [problem.nodes[i] for i in outcome.plan.nodes]
    batch = _inputs(served, spec, inputs, requests, seed)
    with stage("starting the cluster"):
        runtime = connect(cluster, address)
    try:
        with stage(f"starting {len(devices)} stages, streaming {len(batch)} requests"):
            done = execute(runtime, problem, outcome.plan, model=served.model, inputs=batch,
                           on_result=_killer(kill_stage, len(batch) // 6, devices, as_json),
                           codec=codec, splitter=served.splitter)
    finally:
        runtime.shutdown()
    return _report(done, compare_outputs(done.outputs, reference_outputs(served.model, batch)),
            problem, outcome, len(batch), codec, as_json, runtime.time_dilation)


def _report(done: PipelineRun, check: OutputCheck, problem: PipelineProblem,
            outcome: PipelineOutcome, requests: int, codec: ActivationCodec,
            as_json: bool, dilation: float = 1.0) -> dict[str, Any]:
    """The figures, printed (``--json``) or told in a line; the throughput against the
    bound in device time (measured × ``dilation``, the time dilation of a cluster slower
    than its devices)."""
    lossless = codec.compression != "zfp"
    exact = lossless and check.max_abs_diff <= EXACT_ATOL
    vacuous = check.compared > 0 and check.reference_max_abs <= VACUOUS_ABS
    figures = {"plan": outcome_json(problem, outcome), "requests": requests,
               "results": len(done.outputs), "in_order": done.request_ids == list(range(
                   len(done.outputs))), "compression": codec.compression,
               "max_abs_diff": check.max_abs_diff, "top1_agreement": check.top1_agreement,
               "reference_max_abs": check.reference_max_abs,
               "outputs_equal_to_the_model": exact, "check_vacuous": vacuous,
               "restarts": done.restarts, "resends": done.resends,
               "duplicates": done.duplicates, "time_dilation": dilation,
               "timings": {"throughput_rps": done.throughput_rps,
                           "latency_p50_s": done.latency_p50_s, "seconds": done.seconds}}
    if as_json:
        print(json.dumps(figures))
        return figures
    order = "in order" if figures["in_order"] else "OUT OF ORDER"
    out.print(f"{len(done.outputs)} of {requests} results, {order}, {verdict(check, codec)}; "
              f"largest difference {check.max_abs_diff:.3g} (outputs up to "
              f"{check.reference_max_abs:.3g}); throughput {done.throughput_rps * dilation:.1f}/s "
              f"vs bound {outcome.throughput_rps:.1f}/s{_dilated(dilation)}; restarts "
              f"{done.restarts}, re-sent "
              f"{done.resends}, duplicates dropped {done.duplicates}")
    return figures


def verdict(check: OutputCheck, codec: ActivationCodec) -> str:
    """What the output check found, in words: equal or different (lossless), the top-1
    agreement (ZFP), or that it was vacuous (every reference output near zero)."""
    if check.compared > 0 and check.reference_max_abs <= VACUOUS_ABS:
        return (f"[yellow]a vacuous check[/]: every output of the unpartitioned model is near "
                f"zero (at most {check.reference_max_abs:.2g}), so any outputs that small "
                "would pass; give --weights, --inputs or --model-arg that give outputs of "
                "ordinary size")
    if codec.compression == "zfp":
        return (f"top-1 agreement {check.top1_agreement:.3f} with ZFP (bound "
                f"{codec.tolerance:g} per hop)")
    exact = check.max_abs_diff <= EXACT_ATOL
    return ("equal to" if exact else "DIFFERENT from") + " the unpartitioned model"


def _dilated(dilation: float) -> str:
    return "" if dilation == 1.0 else f" (device time: measured x {dilation:.2f})"
