"""What a team would use instead, on the same devices: Ray Train's ``TorchTrainer`` (PyTorch
DDP over gloo, one worker per worker device, equal shards) and a plain PyTorch loop on the
fastest device alone. Same workload, seed, Adam, learning rate, schedule and epochs as the
edgewise arms, and the same devices: the cluster's SIFT apps run beside these arms too
(``update.run.apps_running``), so every arm shares its devices alike. On an emulated
cluster each DDP rank's compute is stretched to its device's speed exactly as the engine's
workers are (``runtime.emulation.emulated_compute``). On devices (a testbed, a real cluster)
each rank is placed on its worker device by the device's node label
(``ray_cluster.LABEL_DEVICE``, Ray Train's per-worker ``label_selector``), its gloo traffic
crosses the devices' links and nothing is stretched."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgewise.runtime.ray_cluster import LABEL_DEVICE, RayRuntime
from edgewise.suites.tta_arms import ArmResult, TTASetup, app_misses, curve_of
from edgewise.update.run import apps_running

__all__ = ["BATCH_PER_WORKER", "DDPPlacement", "ddp_placement", "fastest_device",
           "fit_keeping_ctrl_c", "ray_train_ddp_arm", "single_device_arm"]

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


def _evaluate(model: Any, task: Any, val: tuple[Any, Any], calib_x: Any,
              stretch: float) -> tuple[float, float, float]:
    """The epoch's accuracy as the engine measures it (``runtime.evaluate.validation_metric``
    on a copy of ``model``: BatchNorm's statistics re-estimated on ``calib_x``, the training
    samples the engine's evaluator re-estimates on), at the device's speed; the accuracy
    with the replica's own running statistics, as a DDP user evaluating ``model.eval()``
    reads it; and the wall seconds of that second reading, which the epoch does not count.
    Evaluating with the running statistics alone would measure the evaluation, not the
    training: the same DDP training read 0.90 one to three epochs later that way
    (docs/workloads.md)."""
    import copy

    from edgewise.runtime.emulation import emulated_compute
    from edgewise.runtime.evaluate import validation_metric

    x, y = val
    with emulated_compute(stretch):
        measured = validation_metric(copy.deepcopy(model), task, x, y, calib_x)
    started = time.perf_counter()
    running = validation_metric(model, task, x, y, None)  # no calibration data: as it is
    return measured, running, time.perf_counter() - started


@dataclass(frozen=True, slots=True)
class DDPPlacement:
    """Where the DDP ranks run: ``devices`` (rank ``i`` on ``devices[i]`` when not
    ``by_label``), each rank's compute ``stretch``, the ``evaluator`` device whose rank
    validates each epoch, and, on devices, one node-label selector per rank."""

    devices: tuple[str, ...]
    stretch: dict[str, float]
    evaluator: str
    label_selector: list[dict[str, str]] | None

    @property
    def by_label(self) -> bool:
        return self.label_selector is not None


def fastest_device(runtime: RayRuntime, devices: list[str]) -> str:
    """The fastest of ``devices`` by the cluster's nominal speed (the first on a tie), as the
    engine picks its evaluator (``runtime.launch.evaluator_device``): stretch factors are 1
    on a testbed and would not tell the devices apart."""
    return max(devices, key=lambda d: runtime.cluster.device(d).speed)


def ddp_placement(runtime: RayRuntime, workers: list[str]) -> DDPPlacement:
    """One rank per worker device. On an emulating instance every device is this host: rank
    ``i`` is ``workers[i]`` by its stretch. On devices each rank's bundle asks for its
    device's node label, so the ranks land one per device, and a rank learns its device
    from its node's label (Ray Train numbers the ranks itself)."""
    selector = None if runtime.emulated else [{LABEL_DEVICE: w} for w in workers]
    return DDPPlacement(tuple(workers), {w: runtime.stretch[w] for w in workers},
                        fastest_device(runtime, workers), selector)


def _rank_device(config: dict[str, Any], rank: int) -> str:
    """The device rank ``rank`` runs on (its node's label where the ranks were placed by
    label)."""
    if not config["by_label"]:
        return str(config["devices"][rank])
    import ray

    label = ray.get_runtime_context().get_node_labels().get(LABEL_DEVICE)
    found = label[0] if isinstance(label, list) else label
    if found not in config["stretch"]:
        raise RuntimeError(f"DDP rank {rank} runs on a node labelled {LABEL_DEVICE}={found!r}, "
                           f"not one of the worker devices {sorted(config['stretch'])}")
    return str(found)


def _loop(config: dict[str, Any], rank: int, world: int, wrap: Any,
          device: str | None = None) -> list[tuple[float, float, float]]:
    """The training loop every rank runs: its equal shard, batches of BATCH_PER_WORKER; the
    (accuracy, accuracy with running statistics, epoch seconds) of each epoch (accuracies
    measured by the rank on the evaluator device, NaN on the others; ``_evaluate``).
    ``device`` is the rank's (default: ``_rank_device``)."""
    import torch

    from edgewise.nn.models import Warmup, epoch_lr
    from edgewise.nn.workload import build_model, loss
    from edgewise.runtime.datastore import calibration_ids
    from edgewise.runtime.emulation import emulated_compute
    from edgewise.runtime.engine import CALIBRATION_SAMPLES

    torch.set_num_threads(1)
    device = device or _rank_device(config, rank)
    stretch = float(config["stretch"][device])
    workload, x, y, vx, vy = _setting(config)
    calib_x = x[calibration_ids(len(y), CALIBRATION_SAMPLES, config["seed"])]
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
            group["lr"] = epoch_lr(config["lr"], config["schedule"], epoch, config["epochs"],
                                   Warmup(*config["warmup"]))
        order = np.random.default_rng([config["seed"], epoch, rank]).permutation(shard)
        for i in range(0, len(order), BATCH_PER_WORKER):
            index = order[i : i + BATCH_PER_WORKER]
            with emulated_compute(stretch):
                opt.zero_grad()
                loss(workload.task, model(x[index]), y[index]).backward()  # type: ignore[no-untyped-call]
                opt.step()
        # the rank on the evaluator device evaluates its replica outside DDP (DDP's forward
        # would broadcast buffers, a collective the other ranks do not join), at its
        # device's speed as the engine's evaluating worker does: the epoch's time counts it
        # on both sides
        plain = getattr(model, "module", model)
        acc, running, uncounted = float("nan"), float("nan"), 0.0
        if device == config["evaluator"]:
            acc, running, uncounted = _evaluate(plain, workload.task, (vx, vy), calib_x, stretch)
        curve.append((acc, running, time.perf_counter() - started - uncounted))
    return curve


def _ddp_worker(config: dict[str, Any]) -> None:
    """Ray Train's per-worker function: DDP over gloo (``prepare_model``)."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    device = _rank_device(config, rank)
    curve = _loop(config, rank, ctx.get_world_size(), ray.train.torch.prepare_model, device)
    metrics = {"accuracies": [a for a, _, _ in curve], "seconds": [s for _, _, s in curve],
               "running_statistics": [r for _, r, _ in curve], "device": device}
    # Ray Train 2.x keeps no metrics reported without a checkpoint: a file on the driver's
    # host (a testbed's devices share it) from the evaluating rank, and each rank's device
    Path(config["out"]).with_suffix(f".rank{rank}").write_text(device)
    if device == config["evaluator"]:
        Path(config["out"]).write_text(json.dumps(metrics))
    ray.train.report(metrics)


def _config(setup: TTASetup, placement: DDPPlacement) -> dict[str, Any]:
    from edgewise.nn.workload import load_workload, workload_to_dict
    from edgewise.runtime.balance import batch_warmup, lr_scale

    # the learning rate follows the global batch from the engine arms' reference, as theirs
    factor = lr_scale("adam", setup.reference_batch, BATCH_PER_WORKER * len(placement.devices))
    warmup = batch_warmup(factor, setup.epochs)
    return {"workload": workload_to_dict(load_workload(setup.spec)), "seed": setup.seed,
            "lr": setup.learning_rate * factor, "warmup": [warmup.epochs, warmup.start_factor],
            "schedule": setup.lr_schedule, "epochs": setup.epochs,
            "devices": list(placement.devices), "stretch": dict(placement.stretch),
            "evaluator": placement.evaluator, "by_label": placement.by_label}


ABORT_S = 10.0
"""How long a Ctrl-C waits for Ray Train's controller to stop its workers. On the testbed
the controller runs on the driver's device, under its CPU quota: there an abort had not
answered in 30 s (2026-12-06, twice), and the testbed's teardown ends the workers anyway."""


@functools.cache
def _trainer_class() -> type[Any]:
    """``TorchTrainer``, except that ``fit()`` leaves SIGINT to the caller. Ray Train V2's
    ``fit()`` in the main thread installs a handler of its own (abort the run; ``sys.exit``
    if it is gone or at the third signal) and never puts the caller's back: after the race's
    first DDP arm a Ctrl-C did nothing (measured), and the third would exit the bench with
    no JSON (docs/workloads.md). This class keeps the
    controller instead, so :func:`fit_keeping_ctrl_c` can abort it on a KeyboardInterrupt."""
    from ray.train.torch import TorchTrainer

    class KeepsCtrlC(TorchTrainer):
        controller: Any = None

        def _register_sigint_handler(self, controller: Any) -> None:
            self.controller = controller

    return KeepsCtrlC


def fit_keeping_ctrl_c(trainer: Any) -> None:
    """``trainer.fit()``; on Ctrl-C, its run is aborted (its workers stopped, within
    :data:`ABORT_S`) and the KeyboardInterrupt goes on to the caller. The caller's SIGINT
    handler is in place afterwards whatever happened, also where a Ray version installs its
    own by another route. Off the main thread (where no signal handler can be set, and Ray
    Train sets none) it is ``fit()`` alone."""
    previous = signal.getsignal(signal.SIGINT)
    restore = previous is not None and threading.current_thread() is threading.main_thread()
    try:
        trainer.fit()
    except KeyboardInterrupt:
        _abort(getattr(trainer, "controller", None))
        raise
    finally:
        if restore:
            signal.signal(signal.SIGINT, previous)


def _abort(controller: Any) -> None:
    """Ask Ray Train's controller to stop the run; a controller already gone, or one that
    does not answer in time, is left to the cluster's teardown."""
    if controller is None:
        return
    import ray

    print(f"ray-train-ddp: stopping Ray Train's run (at most {ABORT_S:.0f} s)",
          file=sys.stderr, flush=True)
    with contextlib.suppress(ray.exceptions.RayError):
        ray.get(controller.abort.remote(), timeout=ABORT_S)


def ray_train_ddp_arm(runtime: RayRuntime, setup: TTASetup, workers: list[str],
                      gloo_ifname: str | None = None) -> ArmResult:
    """Ray Train's TorchTrainer: one DDP rank per worker device (gloo, CPU), equal shards.
    ``gloo_ifname`` is the network interface gloo binds on every rank (a testbed's
    ``eth0``: inside a device's namespace the host's name resolves to no address of its
    own, and gloo would fall back to loopback, which the other devices cannot reach)."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig

    placement = ddp_placement(runtime, workers)
    config = _config(setup, placement)
    # Ray Train V2's (the default since Ray 2.5x) per-worker label selectors and workers'
    # environment, passed only where needed: an emulating instance places nothing by label
    placed: dict[str, Any] = {} if placement.label_selector is None else {
        "label_selector": placement.label_selector}
    env: dict[str, Any] = {} if gloo_ifname is None else {
        "worker_runtime_env": {"env_vars": {"GLOO_SOCKET_IFNAME": gloo_ifname}}}
    with tempfile.TemporaryDirectory(prefix="edgewise-ddp-") as tmp:
        config["out"] = str(Path(tmp) / "curve.json")
        trainer = _trainer_class()(
            _ddp_worker, train_loop_config=config,
            torch_config=TorchConfig(backend="gloo"),
            scaling_config=ScalingConfig(num_workers=len(workers), use_gpu=False,
                                         resources_per_worker={"CPU": 0.01}, **placed),
            run_config=RunConfig(storage_path=tmp, name="tta-ddp", **env))
        with apps_running(runtime) as apps:
            fit_keeping_ctrl_c(trainer)
        metrics = json.loads(Path(config["out"]).read_text())
        ranks = {int(p.suffix.removeprefix(".rank")): p.read_text()
                 for p in Path(tmp).glob("curve.rank*")}
    seconds = [s / runtime.time_dilation for s in metrics.get("seconds", [])]
    accs, times = curve_of(list(metrics.get("accuracies", [])), seconds)
    return ArmResult("ray-train-ddp", accs, times, deadline_misses=app_misses(apps),
                     extra={"workers": workers, "batch_per_worker": BATCH_PER_WORKER,
                            "running_statistics": metrics.get("running_statistics", []),
                            "rank_devices": [ranks[r] for r in sorted(ranks)],
                            "evaluator": placement.evaluator})


def single_device_arm(runtime: RayRuntime, setup: TTASetup, device: str) -> ArmResult:
    """A plain PyTorch loop (batch BATCH_PER_WORKER) on ``device`` alone, as a Ray task on
    it, its compute stretched to the device's speed."""
    import ray

    config = _config(setup, DDPPlacement((device,), {device: runtime.stretch[device]},
                                         device, None))

    @ray.remote(num_cpus=0)
    def run() -> list[tuple[float, float, float]]:
        return _loop(config, 0, 1, lambda model: model, device)

    options = runtime.actor_options(device, 512)
    with apps_running(runtime) as apps:
        curve = ray.get(run.options(**{k: v for k, v in options.items()
                                       if k in ("resources", "scheduling_strategy")}).remote())
    accs, times = curve_of([a for a, _, _ in curve],
                           [s / runtime.time_dilation for _, _, s in curve])
    return ArmResult("single-device", accs, times, deadline_misses=app_misses(apps),
                     extra={"device": device, "running_statistics": [r for _, r, _ in curve]})
