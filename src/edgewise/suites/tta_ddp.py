"""What a team would use instead, on the same devices: Ray Train's ``TorchTrainer`` (PyTorch
DDP over gloo, one worker per worker device, equal shards) and a plain PyTorch loop on the
fastest device alone. Same workload, seed, Adam, learning rate, schedule and epochs as the
edgewise arms, and the same devices: the cluster's SIFT apps run beside these arms too
(``update.run.apps_running``), so every arm shares its devices alike. On an emulated
cluster each DDP rank's compute is stretched to its device's speed exactly as the engine's
workers are (``runtime.emulation.emulated_compute``)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.suites.tta_arms import ArmResult, TTASetup, app_misses, curve_of
from edgewise.update.run import apps_running

__all__ = ["BATCH_PER_WORKER", "ray_train_ddp_arm", "single_device_arm"]

BATCH_PER_WORKER = 32  # the equal plan's batch (edgewise's default), per DDP rank


def _setting(config: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
    """The workload (resolved), its train and validation samples as tensors."""
    import torch

    from edgewise.nn.workload import open_data, resolved, validate, workload_from_dict

    workload = workload_from_dict(config["workload"])
    workload = resolved(workload, validate(workload, seed=config["seed"]))
    source = open_data(workload, config["seed"])
    train = source.read("train", np.arange(source.size("train"), dtype=np.int64))
    val = source.read("val", np.arange(source.size("val"), dtype=np.int64))
    return (workload, torch.from_numpy(train.x), torch.from_numpy(train.y),
            torch.from_numpy(val.x), torch.from_numpy(val.y))


def _accuracy(model: Any, task: Any, x: Any, y: Any) -> float:
    import torch

    from edgewise.nn.workload import metric_hits

    model.eval()
    with torch.no_grad():
        hits = sum(metric_hits(task, model(x[i : i + 256]), y[i : i + 256])
                   for i in range(0, len(y), 256))
    model.train()
    return hits / max(len(y), 1)


def _loop(config: dict[str, Any], rank: int, world: int, wrap: Any) -> list[tuple[float, float]]:
    """The training loop every rank runs: its equal shard, batches of BATCH_PER_WORKER; the
    (accuracy, epoch seconds) of each epoch (accuracy measured on rank 0)."""
    import torch

    from edgewise.nn.workload import build_model, loss
    from edgewise.runtime.emulation import emulated_compute
    from edgewise.runtime.ps import epoch_lr

    torch.set_num_threads(1)
    workload, x, y, vx, vy = _setting(config)
    rng = np.random.default_rng(config["seed"])
    shards = np.array_split(rng.permutation(len(y)), world)
    shard = shards[rank][: min(len(s) for s in shards)]  # equal steps on every rank
    model = wrap(build_model(workload, seed=config["seed"], num_classes=workload.task.num_classes,
                             input_shape=workload.task.input_shape).train())
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    curve = []
    for epoch in range(config["epochs"]):
        started = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = epoch_lr(config["lr"], config["schedule"], epoch, config["epochs"])
        order = np.random.default_rng([config["seed"], epoch, rank]).permutation(shard)
        for i in range(0, len(order), BATCH_PER_WORKER):
            index = order[i : i + BATCH_PER_WORKER]
            with emulated_compute(config["stretch"][rank]):
                opt.zero_grad()
                loss(workload.task, model(x[index]), y[index]).backward()  # type: ignore[no-untyped-call]
                opt.step()
        # rank 0 evaluates its replica outside DDP (DDP's forward would broadcast buffers,
        # a collective the other ranks do not join), at its device's speed as the engine's
        # evaluating worker does: the epoch's time counts it on both sides
        plain = getattr(model, "module", model)
        acc = float("nan")
        if rank == 0:
            with emulated_compute(config["stretch"][rank]):
                acc = _accuracy(plain, workload.task, vx, vy)
        curve.append((acc, time.perf_counter() - started))
    return curve


def _ddp_worker(config: dict[str, Any]) -> None:
    """Ray Train's per-worker function: DDP over gloo (``prepare_model``)."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    curve = _loop(config, rank, ctx.get_world_size(), ray.train.torch.prepare_model)
    metrics = {"accuracies": [a for a, _ in curve], "seconds": [s for _, s in curve]}
    if rank == 0:  # Ray Train 2.x keeps no metrics reported without a checkpoint: a file
        Path(config["out"]).write_text(json.dumps(metrics))  # on the driver's host
    ray.train.report(metrics)


def _config(setup: TTASetup, stretch: list[float]) -> dict[str, Any]:
    from edgewise.nn.workload import load_workload, workload_to_dict

    return {"workload": workload_to_dict(load_workload(setup.spec)), "seed": setup.seed,
            "lr": setup.learning_rate, "schedule": setup.lr_schedule, "epochs": setup.epochs,
            "stretch": stretch}


def ray_train_ddp_arm(runtime: RayRuntime, setup: TTASetup, workers: list[str]) -> ArmResult:
    """Ray Train's TorchTrainer: one DDP rank per worker device (gloo, CPU), equal shards."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    config = _config(setup, [runtime.stretch[w] for w in workers])
    with tempfile.TemporaryDirectory(prefix="edgewise-ddp-") as tmp:
        config["out"] = str(Path(tmp) / "curve.json")
        trainer = TorchTrainer(
            _ddp_worker, train_loop_config=config,
            torch_config=TorchConfig(backend="gloo"),
            scaling_config=ScalingConfig(num_workers=len(workers), use_gpu=False,
                                         resources_per_worker={"CPU": 0.01}),
            run_config=RunConfig(storage_path=tmp, name="tta-ddp"))
        with apps_running(runtime) as apps:
            trainer.fit()
        metrics = json.loads(Path(config["out"]).read_text())
    seconds = [s / runtime.time_dilation for s in metrics.get("seconds", [])]
    accs, times = curve_of(list(metrics.get("accuracies", [])), seconds)
    return ArmResult("ray-train-ddp", accs, times, deadline_misses=app_misses(apps),
                     extra={"workers": workers, "batch_per_worker": BATCH_PER_WORKER})


def single_device_arm(runtime: RayRuntime, setup: TTASetup, device: str) -> ArmResult:
    """A plain PyTorch loop (batch BATCH_PER_WORKER) on ``device`` alone, as a Ray task on
    it, its compute stretched to the device's speed."""
    import ray

    config = _config(setup, [runtime.stretch[device]])

    @ray.remote(num_cpus=0)
    def run() -> list[tuple[float, float]]:
        return _loop(config, 0, 1, lambda model: model)

    options = runtime.actor_options(device, 512)
    with apps_running(runtime) as apps:
        curve = ray.get(run.options(**{k: v for k, v in options.items()
                                       if k in ("resources", "scheduling_strategy")}).remote())
    accs, times = curve_of([a for a, _ in curve], [s / runtime.time_dilation for _, s in curve])
    return ArmResult("single-device", accs, times, deadline_misses=app_misses(apps),
                     extra={"device": device})
