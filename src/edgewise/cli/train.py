"""`edgewise train`: a real data-parallel model update on the cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgewise.cli.common import Address, err, out, state_dir, user_errors
from edgewise.cli.loop_opts import (
    EvaluationOpt,
    LrReferenceOpt,
    ModeOpt,
    ShardsOpt,
    TargetOpt,
    WireOpt,
    checked_evaluation,
    checked_mode,
    checked_shards,
    checked_wire,
    reached_line,
)
from edgewise.cli.progress import TrainingProgress
from edgewise.cli.render import cluster_table, result_table
from edgewise.cli.stages import stage
from edgewise.cli.tables import print_fitted
from edgewise.cluster.examples import examples_dir
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.nn.workload import load_workload, validate
from edgewise.runtime.engine import TrainResult, train
from edgewise.runtime.faults import KillMidEpoch
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import connect

__all__ = ["N_TRAIN", "run_equal_update", "train_command"]

N_TRAIN = 1437  # samples in the digits training split
EXAMPLES = examples_dir()


def _parse_kill(spec: str) -> tuple[str, int]:
    device, _, epoch = spec.partition("@")
    if not device or not epoch.isdigit():
        raise ConfigError(f"expected DEVICE@EPOCH, got {spec!r}", field="--kill-worker")
    return device, int(epoch)


def run_equal_update(cluster_file: Path, config: TrainConfig, batch_size: int,
                     kill: str | None, ledger_path: Path | None,
                     address: str | None = None) -> TrainResult:
    """Emulate the cluster (or join it at ``address``), train the config's workload with
    equal shards, show progress and, with a target accuracy, when it was reached; the
    result."""
    cluster = load_cluster(cluster_file)
    samples = N_TRAIN if config.workload is None else validate(
        config.workload, seed=config.seed).train_samples
    hooks: list[Any] = []
    if kill:
        device, epoch = _parse_kill(kill)
        if device not in cluster.device_names:
            raise ConfigError(f"no device named {device!r}", field="--kill-worker")
        hooks.append(KillMidEpoch(device, epoch, samples))
    with stage("starting the cluster"):
        runtime = connect(cluster, address or None)
    try:
        print_fitted(cluster_table(cluster, runtime.stretch if runtime.emulated else None), out)
        plan = equal_plan(cluster, samples, batch_size)
        err.print(f"plan: equal shards {dict(plan.shards)}, batch {batch_size}, parameter "
                  f"server {plan.ps_device}, data store {plan.store_device}, {config.mode} loop")
        ledger = StrikeLedger(ledger_path)
        with TrainingProgress(config.epochs, samples, *hooks) as progress:
            result = train(runtime, config, plan, ledger=ledger, events=progress,
                           checkpoint_dir=state_dir() / "checkpoints")
    finally:
        runtime.shutdown()
    print_fitted(result_table(result), out)
    if config.target_accuracy is not None:
        err.print(reached_line(result, config.target_accuracy))
    return result


@user_errors
def train_command(
    file: Annotated[Path, typer.Argument(help="cluster YAML file")],
    mode: str = ModeOpt,
    epochs: int = typer.Option(8, min=1, max=1000),
    batch_size: int = typer.Option(32, min=1, max=4096),
    learning_rate: float = typer.Option(0.003, min=1e-6, max=10.0),
    lr_reference_batch: int = LrReferenceOpt,
    seed: int = typer.Option(0),
    kill_worker: str = typer.Option("", help="inject a crash: kill DEVICE's worker in EPOCH, "
                                             "as DEVICE@EPOCH"),
    address: str = Address,
    workload: Path | None = typer.Option(None, "--workload", help="a workload YAML (your "
                                         "model and data, docs/workloads.md); default: the "
                                         "digits CNN"),
    target_accuracy: float = TargetOpt,
    wire_dtype: str = WireOpt,
    evaluation: str = EvaluationOpt,
    ps_shards: str = ShardsOpt,
) -> None:
    """Run a real data-parallel model update (the digits CNN, or --workload) with equal
    shards; report each epoch's accuracy, device seconds and staleness."""
    config = TrainConfig(mode=checked_mode(mode), epochs=epochs, learning_rate=learning_rate,
                         lr_reference_batch=lr_reference_batch,
                         seed=seed, workload=load_workload(workload) if workload else None,
                         target_accuracy=target_accuracy or None,
                         wire_dtype=checked_wire(wire_dtype),
                         evaluation=checked_evaluation(evaluation),
                         ps_shards=checked_shards(ps_shards))
    run_equal_update(file, config, batch_size, kill_worker or None, state_dir() / "strikes.json",
                     address)
