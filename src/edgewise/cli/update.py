"""`edgewise update ...`: plan a model update (Deep-Edge) and carry it out."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from edgewise.cli.common import Address, err, out, state_dir, user_errors, writable_folder
from edgewise.cli.loop_opts import (
    EvaluationOpt,
    LrReferenceOpt,
    ModeOpt,
    ShardsOpt,
    WireOpt,
    checked_evaluation,
    checked_mode,
    checked_shards,
    checked_wire,
    reached_line,
)
from edgewise.cli.progress import TrainingProgress
from edgewise.cli.render import result_table
from edgewise.cli.stages import stage
from edgewise.cli.tables import print_fitted
from edgewise.cli.workload_models import planning_models
from edgewise.cluster.model import Cluster, Role
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.nn.workload import Workload, load_workload, validate
from edgewise.perf.schema import PerfModel
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import (
    DEFAULT_EVALUATION,
    DEFAULT_MODE,
    Evaluation,
    Mode,
    PsShards,
    TrainConfig,
)
from edgewise.runtime.ray_cluster import connect
from edgewise.update import (
    APP_COLUMNS,
    CALIBRATED,
    NAME_PATTERN,
    REGISTRY,
    UpdatePlan,
    UpdateProblem,
    UpdateRun,
    app_row,
    cluster_problem,
    execute,
    score,
)
from edgewise.wire.frames import WireChoice

__all__ = ["DEMO_STATE", "app", "apps_table", "parse_states", "plan_json", "plan_table",
           "run_plan"]

app = typer.Typer(help="Model update (Deep-Edge): plan shards and batch sizes, run them.",
                  no_args_is_help=True)
N_DIGITS = 1437

ClusterFile = Annotated[Path, typer.Argument(help="cluster YAML file")]
States = typer.Option([], "--state", help="DEVICE=CPU,GPU,MEM: a worker's utilisation in % "
                                          "(repeatable; idle otherwise)")
PolicyName = typer.Option("deep-edge", help="deep-edge, deep-edge-literal, fair or exact")


def parse_states(specs: list[str]) -> dict[str, tuple[float, float, float]]:
    """``DEVICE=CPU,GPU,MEM`` items into states; ConfigError names the bad item."""
    states: dict[str, tuple[float, float, float]] = {}
    for spec in specs:
        device, _, values = spec.partition("=")
        try:
            cpu, gpu, mem = (float(v) for v in values.split(","))
        except ValueError:
            raise ConfigError(f"expected DEVICE=CPU,GPU,MEM, got {spec!r}",
                              field="--state") from None
        if not all(0 <= v <= 100 for v in (cpu, gpu, mem)):
            raise ConfigError(f"utilisations are percentages, got {spec!r}", field="--state")
        states[device] = (cpu, gpu, mem)
    return states


def plan_table(problem: UpdateProblem, plan: UpdatePlan, models: str = CALIBRATED) -> Table:
    """Workers, shards, batch sizes and the predicted pressure on each background app;
    ``models`` names the performance models that predicted them."""
    sim = score(problem, plan)
    source = "calibrated device models" if models == CALIBRATED else f"models {models!r}"
    table = Table(title=f"{plan.policy} plan: predicted epoch {plan.predicted_epoch_s:.1f} s "
                        f"for {problem.n_samples} samples ({source})")
    for col in ("worker", "type", "state cpu/gpu/mem %", "shard", "batch", "app", "predicted ms",
                "deadline ms"):
        table.add_column(col, justify="left" if col in ("worker", "type", "app") else "right")
    for w in problem.workers:
        apps = w.apps or ()
        ms = ", ".join(f"{sim.exec_ms[a.name]:.0f}" for a in apps) or "-"
        table.add_row(w.device, w.device_type, "/".join(f"{v:.0f}" for v in w.state),
                      str(plan.shards.get(w.device, 0)) or "-",
                      str(plan.batch_sizes.get(w.device, "-")),
                      ", ".join(a.name for a in apps) or "-", ms,
                      ", ".join(f"{a.deadline:.0f}" for a in apps) or "-")
    return table


def plan_json(problem: UpdateProblem, plan: UpdatePlan) -> dict[str, Any]:
    """The plan as one JSON-able object: each worker's shard (0: not used), batch (None) and
    each app's predicted execution time against its deadline."""
    sim = score(problem, plan)
    return {
        "policy": plan.policy, "samples": problem.n_samples,
        "predicted_epoch_s": plan.predicted_epoch_s, "noise_scale": problem.noise_scale,
        "workers": [{"device": w.device, "type": w.device_type, "state": list(w.state),
                     "shard": plan.shards.get(w.device, 0),
                     "batch": plan.batch_sizes.get(w.device),
                     "apps": [{"app": a.name, "predicted_ms": sim.exec_ms[a.name],
                               "deadline_ms": a.deadline} for a in w.apps]}
                    for w in problem.workers],
    }


def apps_table(apps: Sequence[Mapping[str, Any]]) -> Table:
    """The background apps' statistics (a manager's update job shows the same table)."""
    table = Table(title="background apps, measured while the update ran")
    for col in APP_COLUMNS:
        table.add_column(col, justify="left" if col == "app" else "right")
    for a in apps:
        table.add_row(*(str(v) for v in app_row(a)))
    return table


def _models(name: str, cluster: Cluster) -> dict[str, PerfModel]:
    """The learned models ``name`` (``update fit --models NAME``) for the cluster's worker
    types; empty for ``calibrated``. ConfigError (``--models``) if any type has none."""
    if name == CALIBRATED:
        return {}
    from edgewise.update import load_models

    types = [d.type for d in cluster.with_role(Role.WORKER)]
    try:
        return load_models(state_dir() / "models", name, types)
    except ConfigError as exc:
        raise ConfigError(exc.problem + " (fit them with `edgewise update fit PROFILE "
                          f"--device-type TYPE --models {name}`)", field="--models") from None


def _plan(cluster: Cluster, policy: str, states: list[str], samples: int,
          models: str = CALIBRATED, noise_scale: float | None = None
          ) -> tuple[UpdateProblem, UpdatePlan]:
    given = parse_states(states)
    problem = cluster_problem(cluster, given, samples, models=_models(models, cluster),
                              noise_scale=noise_scale)
    unknown = sorted(set(given) - {w.device for w in problem.workers})
    if unknown:
        raise ConfigError(f"not worker devices of the cluster: {', '.join(unknown)}",
                          field="--state")
    return problem, REGISTRY.get(policy)(problem, np.random.default_rng(0))


ModelsOpt = typer.Option(CALIBRATED, "--models", help="the performance models that plan: "
                         "calibrated, or a name fitted by `update fit --models NAME` (e.g. "
                         "from `edgewise profile --workload W`)")


def _name(models: str) -> str:
    if models != CALIBRATED and not re.fullmatch(NAME_PATTERN, models):
        raise ConfigError(f"a plain name (letters, digits, _ and -), got {models!r}",
                          field="--models")
    return models


NoiseScaleOpt = typer.Option(None, "--noise-scale", min=1e-9, help="the workload's "
                             "gradient noise scale in samples, for --policy "
                             "deep-edge-goodput (a synchronous run measures it: the Adam-"
                             "preconditioned figure in its epoch table's caption)")

WorkloadOpt = typer.Option(None, "--workload", help="a workload YAML (your model and data, "
                           "docs/workloads.md); validated by a dry run before anything starts")


def _workload(path: Path | None) -> tuple[Workload | None, int | None]:
    """The workload of ``--workload`` and its training samples (a dry run checks it)."""
    if path is None:
        return None, None
    workload = load_workload(path)
    return workload, validate(workload).train_samples


@app.command()
@user_errors
def plan(file: ClusterFile, policy: str = PolicyName, state: list[str] = States,
         samples: int = typer.Option(3855, min=1, help="|M|, samples to train (with "
                                     "--workload: its training samples)"),
         workload: Path | None = WorkloadOpt, models: str = ModelsOpt,
         noise_scale: float | None = NoiseScaleOpt,
         as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Plan the model update of a cluster: workers, shards, batch sizes, predicted epoch time
    and predicted pressure on each background app."""
    cluster = load_cluster(file)
    spec, found = _workload(workload)
    models, note = planning_models(spec, workload, _name(models), cluster,
                                   state_dir() / "models")
    if note:
        err.print(note, highlight=False)
    problem, result = _plan(cluster, policy, state, found or samples, models, noise_scale)
    if as_json:
        print(json.dumps({**plan_json(problem, result), "models": models}))
    else:
        print_fitted(plan_table(problem, result, models), out)


@app.command()
@user_errors
def run(file: ClusterFile, policy: str = PolicyName, state: list[str] = States,
        epochs: int = typer.Option(5, min=1, max=1000),
        target_accuracy: float = typer.Option(0.0, min=0.0, max=1.0,
                                              help="stop early at this accuracy (0: off)"),
        workload: Path | None = WorkloadOpt, address: str = Address,
        models: str = ModelsOpt, mode: str = ModeOpt,
        apps: bool = typer.Option(True, "--apps/--no-apps",
                                  help="run the cluster's background apps beside the "
                                  "training (--no-apps: train alone)"),
        noise_scale: float | None = NoiseScaleOpt, wire_dtype: str = WireOpt,
        evaluation: str = EvaluationOpt, ps_shards: str = ShardsOpt,
        lr_reference_batch: int = LrReferenceOpt) -> None:
    """Plan with POLICY, then run the update on the cluster (emulated, or joined with
    --address) with every background app really running, training the digits CNN or, with
    --workload, your model on your data; report epochs and each app's deadline misses."""
    run_plan(file, policy, state, epochs, target_accuracy, address, workload, _name(models),
             checked_mode(mode), apps, noise_scale, checked_wire(wire_dtype),
             checked_evaluation(evaluation), checked_shards(ps_shards), lr_reference_batch)


# A Nano under CPU and GPU stress: SIFT meets its deadline idle (175 ms) but not with training.
DEMO_STATE = "nano-2=65,75,30"


def run_plan(file: Path, policy: str, state: list[str], epochs: int,
             target_accuracy: float, address: str | None = None,
             workload_file: Path | None = None, models: str = CALIBRATED,
             mode: Mode = DEFAULT_MODE, apps: bool = True,
             noise_scale: float | None = None,
             wire_dtype: WireChoice = "auto",
             evaluation: Evaluation = DEFAULT_EVALUATION,
             ps_shards: PsShards = "auto", lr_reference_batch: int = 0) -> UpdateRun:
    """Plan (with the performance models ``models``), show the plan, run it with the
    background apps (on the emulated cluster, or the one at ``address``), show the
    measurements."""
    cluster = load_cluster(file)  # parsed once for the plan and the run
    workload, found = _workload(workload_file)
    samples = found or N_DIGITS
    models, note = planning_models(workload, workload_file, models, cluster,
                                   state_dir() / "models")
    if note:
        err.print(note, highlight=False)
    problem, result = _plan(cluster, policy, state, samples, models, noise_scale)
    print_fitted(plan_table(problem, result, models), out)
    with stage("starting the cluster"):
        runtime = connect(cluster, address or None)
    emulated = runtime.emulated
    config = TrainConfig(epochs=epochs, target_accuracy=target_accuracy or None,
                         workload=workload, mode=mode, wire_dtype=wire_dtype,
                         evaluation=evaluation, ps_shards=ps_shards,
                         lr_reference_batch=lr_reference_batch)
    try:
        with TrainingProgress(epochs, samples) as progress:
            done = execute(runtime, problem, result, config=config,
                           ledger=StrikeLedger(state_dir() / "strikes.json"), events=progress,
                           background_apps=apps)
    finally:
        runtime.shutdown()
    print_fitted(result_table(done.result), out)
    if target_accuracy:
        err.print(reached_line(done.result, target_accuracy))
    if apps:
        print_fitted(apps_table(done.apps), out)
    if runtime.time_dilation != 1.0:
        err.print(f"This cluster runs {runtime.time_dilation:.2f}x slower than its devices "
                  "(a testbed's time dilation): epoch seconds above are measured here, the "
                  "apps' execution times are in device time.")
    if emulated:
        trained = workload.label if workload is not None else "the digits CNN"
        err.print(f"The plan's times are predicted by the {models} device models; the "
                  f"measured times are the emulated update's of {trained}. On an emulated "
                  "cluster "
                  "every background app runs on this host's cores beside all the training, "
                  "so their misses measure the host's contention as much as the plan (see "
                  "docs/deep-edge.md).")
    return done


@app.command()
@user_errors
def fit(
    profile_csv: Annotated[Path, typer.Argument(help="a profile CSV (edgewise profile)")],
    device_type: str = typer.Option(..., help="the device type the profile was recorded on"),
    output: Path = typer.Option(None, help="save the models here (default: the state dir's "
                                "models/NAME/TYPE)"),
    models: str = typer.Option("default", "--models", help="the models' name: fit one set "
                               "per workload (its profile) and plan with `--models NAME`"),
    budget: float = typer.Option(0.0, min=0.0, help="AutoML seconds per function (0: trials)"),
    trials: int = typer.Option(30, min=1, help="AutoML trials per function when budget is 0"),
    seed: int = typer.Option(0),
) -> None:
    """Fit the performance and interference models of one device type from a profile
    (FLAML AutoML), print their held-out MAPE (Table I) and save them."""
    import pandas as pd

    from edgewise.perf.models import fit_models, mape_markdown, mape_table, save

    target = output or state_dir() / "models" / _name(models) / device_type
    writable_folder(target.parent, "--output")
    try:
        frame = pd.read_csv(profile_csv)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the profile: {exc}", source=str(profile_csv)) from None
    with err.status(f"fitting {device_type} models"):
        fitted = fit_models(frame, device_type, time_budget_s=budget or None,
                            max_trials=None if budget else trials, seed=seed)
    save(fitted, target)
    print(mape_markdown(mape_table({device_type: fitted})))
    err.print(f"saved to {target}")
