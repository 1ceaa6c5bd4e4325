"""`edgewise modelparallel ...`: pre-train SROLE's agents, place a job, compare the methods.
Each command prints a table, or one JSON object with ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.table import Table

from edgewise.cli.common import Address, err, out, state_dir, user_errors
from edgewise.cli.stages import stage
from edgewise.cli.tables import print_fitted
from edgewise.cli.workload_opts import (
    ClassesOpt,
    InputShapeOpt,
    ModelArgOpt,
    WeightsOpt,
    workload_from_cli,
)
from edgewise.errors import ConfigError
from edgewise.modelparallel import (
    KAPPA,
    METHOD_NAMES,
    ModelRef,
    QAgent,
    RoundResult,
    SimOutcome,
    SroleProblem,
    check_model,
    get_method,
    load_agents,
    play_round,
    pretrain,
    random_network,
    random_round,
    save_agents,
    simulate,
    spread_training,
    srole_models,
)

__all__ = ["app", "demo_part", "method_means", "placement_table", "results_table"]

app = typer.Typer(help="Model-parallel training placement on edge clusters (SROLE): "
                       "per-node RL agents with shields.", no_args_is_help=True)

MethodOpt = typer.Option("srole-c", "--method", "-m",
                         help="rl, marl (CQ-learning), iql, srole-c or srole-d")
ModelOpt = typer.Option("vgg-16", help="vgg-16, googlenet or rnn (SROLE's), or a workload "
                        "model: hf:<ConfigClass>, py:module:factory, py:FILE.py:factory, a zoo "
                        "name (with --model-arg, --weights, --input-shape, --classes)")
SeedOpt = typer.Option(0, help="random seed (same seed, same numbers)")
EdgesOpt = typer.Option(10, min=5, max=100, help="edge nodes (a multiple of 5)")
WorkloadOpt = typer.Option(100.0, min=50.0, max=100.0, help="PageRank workload, %")
RoundsOpt = typer.Option(600, min=1, max=100_000, help="offline pre-training rounds")
PartsOpt = typer.Option(None, "--partitions", min=1, max=64,
                        help="group each model's levels into at most this many FLOP-balanced "
                             "partitions (default: one partition per model level, §III)")
JsonOpt = typer.Option(False, "--json", help="print one JSON object instead of a table")
WorkloadFileOpt = typer.Option(None, "--workload-file",
                               help="a workload YAML file naming the model (--workload is the "
                                    "PageRank load)")


def model_ref(model: str | None, args: list[str], weights: Path | None,
              input_shape: str | None, classes: int | None,
              workload: Path | None) -> ModelRef | None:
    """SROLE's model by name, or the workload the flags name (checked: it builds and
    traces); None when nothing names a model."""
    if workload is None and model is None:
        return None
    plain = not (args or weights or input_shape or classes)
    if workload is None and plain and model in srole_models():
        return model
    ref = workload_from_cli(model, args=args, weights=weights, input_shape=input_shape,
                            classes=classes, workload=workload)
    check_model(ref)
    return ref


def _agents_path(method: str) -> Path:
    return state_dir() / "srole" / f"{method}.json"


def _trained(method: str, agents: Path | None, rounds: int, seed: int,
             parts: int | None = None, models: list[ModelRef] | None = None) -> QAgent:
    """The saved agent for ``method`` (``agents`` or the state directory), else pre-train."""
    get_method(method)  # an unknown method is reported before anything is read or trained
    path = agents or _agents_path(method)
    if path.exists():
        saved, loaded = load_agents(path)
        if saved != method:
            raise ConfigError(f"{path} holds agents of {saved!r}, not {method!r}",
                              field="--agents")
        return loaded[0]
    if agents is not None:
        raise ConfigError(f"no such file: {agents}", field="--agents")
    err.print(f"no saved agents for {method}; pre-training {rounds} rounds")
    return pretrain(get_method(method), models or list(srole_models()),
                    np.random.default_rng(seed), rounds, n_partitions=parts)


@app.command("train")
@user_errors
def train_command(
    method: str = MethodOpt, rounds: int = RoundsOpt, seed: int = SeedOpt,
    kappa: float = typer.Option(KAPPA, min=0.0, help="shield penalty κ"),
    output: Path | None = typer.Option(None, "--out", help="JSON file (default: state dir)"),
    parts: int | None = PartsOpt,
    model: str | None = typer.Option(None, help="pre-train on jobs of this model only "
                                     "(default: SROLE's three); as --model of place"),
    args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
    input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
    workload_file: Path | None = WorkloadFileOpt, as_json: bool = JsonOpt,
) -> None:
    """Pre-train a method's agents offline on random networks (§V-A) and save them."""
    get_method(method)
    ref = model_ref(model, args, weights, input_shape, classes, workload_file)
    models = [ref] if ref is not None else list(srole_models())
    agent = pretrain(get_method(method), models, np.random.default_rng(seed), rounds,
                     kappa=kappa, n_partitions=parts)
    path = output or _agents_path(method)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_agents(path, method, [agent])
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror}", field="--out") from None
    if as_json:
        print(json.dumps({"method": method, "states": len(agent.q), "rounds": rounds,
                          "path": str(path)}))
        return
    out.print(f"{method}: {len(agent.q)} states learned in {rounds} rounds, saved to {path}")


def placement_table(res: RoundResult, jobs: list[str], method: str) -> Table:
    """One row per job: its partitions' proposed and executed hosts and its JCT (or why it
    did not run)."""
    table = Table(title=f"{method} placement")
    for col in ("job", "proposed hosts", "executed hosts", "JCT (s)"):
        table.add_column(col)
    for name, p, e, t, f in zip(jobs, res.proposed, res.executed, res.jct_s, res.failed,
                                strict=True):
        table.add_row(name, " ".join(map(str, p.nodes)), " ".join(map(str, e.nodes)),
                      f"{t:.1f}" if f is None else f"not run ({f})")
    return table


@app.command("place")
@user_errors
def place_command(method: str = MethodOpt, model: str = ModelOpt,
                  args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
                  input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
                  workload_file: Path | None = WorkloadFileOpt, edges: int = EdgesOpt,
                  workload: float = WorkloadOpt, seed: int = SeedOpt, rounds: int = RoundsOpt,
                  agents: Path | None = typer.Option(None, help="agents saved by `train`"),
                  parts: int | None = PartsOpt, as_json: bool = JsonOpt) -> None:
    """Place one round of jobs (3 per cluster) on a random Table I network and print it;
    a workload's model is split into levels by graph analysis, as SROLE's own."""
    get_method(method)
    ref = model_ref(None if workload_file else model, args, weights, input_shape, classes,
                    workload_file)
    assert ref is not None
    base = _trained(method, agents, rounds, seed, parts, [ref])
    rng = np.random.default_rng([seed, 1])
    net = random_network(edges, rng)
    rnd = random_round(net, ref, workload, rng, parts)
    res = play_round(get_method(method), rnd, [base.copy() for _ in range(net.n)], rng,
                     explore=False, learn=False)
    if as_json:
        print(json.dumps({
            "method": method,
            "jobs": [{"job": j.name, "origin": j.origin, "proposed": list(p.nodes),
                      "executed": list(e.nodes), "jct_s": None if f else t, "failed": f}
                     for j, p, e, t, f in zip(rnd.jobs, res.proposed, res.executed, res.jct_s,
                                              res.failed, strict=True)],
            "collisions_proposed": res.collisions, "collisions_after": res.collisions_after,
            "corrected": res.corrected}))
        return
    jobs = [f"{j.name} (node {j.origin})" for j in rnd.jobs]
    print_fitted(placement_table(res, jobs, method), out)
    out.print(f"collisions proposed {res.collisions}, after shielding {res.collisions_after}; "
              f"shield moved {res.corrected} partitions")


_COLUMNS = {"jct_s": "JCT s", "collisions": "coll. prop.", "collisions_after": "coll. exec.",
            "overloaded_after": "overloaded", "decision_ops": "decide ops",
            "shield_ops": "shield ops", "failed_runs": "failed", "deferred": "deferred"}


def method_means(out: SimOutcome) -> dict[str, float]:
    """A method's figures: mean JCT of the jobs that ran (waits for re-placement
    included), means per round of collisions and work, and counts of failed (invalid) and
    deferred runs."""
    res = out.rounds
    means = {"jct_s": float(np.mean(out.jct_s())) if out.jct_s() else float("nan")}
    means |= {a: float(np.mean([getattr(r, a) for r in res])) for a in list(_COLUMNS)[1:6]}
    failed = sum(out.failures(k) for k in ("memory", "cpu", "bandwidth"))
    return means | {"failed_runs": float(failed), "deferred": float(out.failures("deferred"))}


def results_table(rows: dict[str, SimOutcome]) -> Table:
    """Per method: mean JCT, collisions, overloaded nodes, decision and shield work,
    failed and deferred runs."""
    table = Table(title="SROLE methods (means per round)")
    for col in ("method", *_COLUMNS.values()):
        table.add_column(col, justify="right")
    for name, outcome in rows.items():
        means = method_means(outcome)
        table.add_row(name, f"{means['jct_s']:.1f}",
                      *(f"{means[a]:.2f}" for a in list(_COLUMNS)[1:6]),
                      *(f"{means[a]:.0f}" for a in list(_COLUMNS)[6:]))
    return table


def _simulate(methods: list[str], model: ModelRef, edges: int, workload: float, online: int,
              rounds: int, seed: int, parts: int | None = None) -> dict[str, SimOutcome]:
    """Each method pre-trained (``rounds``), then ``online`` rounds on the same network;
    a workload's methods pre-train on its jobs."""
    net = random_network(edges, np.random.default_rng([seed, 0]))
    models = tuple(srole_models()) if isinstance(model, str) else (model,)
    problem = SroleProblem(net, model, workload, online, parts, pretrain_rounds=rounds,
                           pretrain_models=models)
    return {name: simulate(problem, name, seed=seed) for name in methods}


@app.command("simulate")
@user_errors
def simulate_command(
    method: list[str] = typer.Option(list(METHOD_NAMES), "--method", "-m",
                                     help="method to compare (repeatable)"),
    model: str = ModelOpt, args: list[str] = ModelArgOpt, weights: Path | None = WeightsOpt,
    input_shape: str | None = InputShapeOpt, classes: int | None = ClassesOpt,
    workload_file: Path | None = WorkloadFileOpt, edges: int = EdgesOpt,
    workload: float = WorkloadOpt,
    online: int = typer.Option(40, min=1, max=10_000, help="online rounds"),
    rounds: int = RoundsOpt, seed: int = SeedOpt, parts: int | None = PartsOpt,
    as_json: bool = JsonOpt) -> None:
    """Pre-train each method, then run it online on the same random network and rounds."""
    for name in method:
        get_method(name)
    ref = model_ref(None if workload_file else model, args, weights, input_shape, classes,
                    workload_file)
    assert ref is not None
    with stage(f"pre-training and simulating {len(method)} methods ({rounds} + {online} "
               "rounds)"):
        rows = _simulate(method, ref, edges, workload, online, rounds, seed, parts)
    if as_json:
        doc: dict[str, Any] = {name: method_means(res) for name, res in rows.items()}
        print(json.dumps(doc))
        return
    print_fitted(results_table(rows), out)


def demo_part(online: int = 20, rounds: int = 200) -> dict[str, float]:
    """`edgewise demo`'s SROLE part (well under 45 s), simulated: the methods pre-trained
    briefly (``rounds``) and compared over ``online`` rounds on a 10-node, 2-cluster network
    training VGG-16 at 100 % workload; each method's mean JCT."""
    with stage(f"pre-training and simulating {len(METHOD_NAMES)} methods ({rounds} + "
               f"{online} rounds)"):
        rows = _simulate(list(METHOD_NAMES), "vgg-16", 10, 100.0, online, rounds, 0)
    print_fitted(results_table(rows), out)
    return {name: method_means(outcome)["jct_s"] for name, outcome in rows.items()}


@app.command("run")
@user_errors
def run_command(
    cluster: Path = typer.Argument(..., exists=True, dir_okay=False,
                                   help="cluster YAML whose devices are the nodes"),
    iterations: int = typer.Option(20, min=2, max=10_000, help="training iterations"),
    origin: str = typer.Option("", help="the device the job starts from (default: the "
                                        "cluster's head device)"),
    seed: int = SeedOpt, address: str = Address, as_json: bool = JsonOpt,
) -> None:
    """Train the bench CNN model-parallel for real on the cluster (emulated, or joined with
    --address): its four levels spread from ORIGIN over the other devices, one stage actor
    per run of levels on a device; the losses and the measured iteration time (and in
    device time: ÷ the cluster's time dilation)."""
    from edgewise.cluster.schema import load_cluster
    from edgewise.runtime.ray_cluster import connect

    spec = load_cluster(cluster)
    if origin and origin not in spec.device_names:
        raise ConfigError(f"the cluster has no device {origin!r}", field="--origin")
    runtime = connect(spec, address or None)
    try:
        run = spread_training(runtime, origin, iterations, seed)
    finally:
        runtime.shutdown()
    dilation = runtime.time_dilation
    figures = {"devices": list(run.devices), "loss_first": round(run.losses[0], 4),
               "loss_last": round(run.losses[-1], 4), "time_dilation": dilation,
               "iteration_s": round(run.mean_iteration_s, 4),
               "iteration_device_s": round(run.mean_iteration_s / dilation, 4)}
    if as_json:
        print(json.dumps(figures))
        return
    out.print(f"{len(run.losses)} iterations on {' -> '.join(run.devices)}: loss "
              f"{figures['loss_first']} -> {figures['loss_last']}; {figures['iteration_s']} s "
              f"per iteration ({figures['iteration_device_s']} s of device time)")
