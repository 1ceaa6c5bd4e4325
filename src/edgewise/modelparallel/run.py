"""Carry a placement out as real model-parallel training (SROLE §IV-A, the model parallelism
of [8]): one stage actor per maximal run of consecutive partitions (model levels) placed on
the same device, forward activations down the chain, activation gradients back up, each
stage stepping its own optimizer."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import torch
from torch import nn

from edgewise.cluster.model import Link
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.modelparallel.emulated import (
    network_cluster,
    network_emulation,
    shared_links,
    stage_runs,
)
from edgewise.modelparallel.problem import EdgeNetwork, Job, TaskPlacement
from edgewise.modelparallel.schedule import Plan, Round
from edgewise.nn.models import OPTIMIZERS
from edgewise.nn.split import split_sequential
from edgewise.runtime.mpstages import TrainStage
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.vessel_pool import release_members, spawn_member
from edgewise.wire.activation import ActivationCodec, decode_activation, encode_activation
from edgewise.wire.state import decode_state_dict, stage_payload

__all__ = ["MPRun", "ModelParallelTrainer", "execute", "network_cluster", "network_emulation",
           "run_placement", "shared_links", "stage_runs", "train_model_parallel"]

Batch = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]
OnStep = Callable[[int, float, float], None]
"""Called after every iteration with its number (from 1), its loss and its wall seconds."""


@dataclass(frozen=True, slots=True)
class MPRun:
    """What :func:`train_model_parallel` measured: the loss and the wall time of every
    iteration (forward through all stages, backward back to the first), and per stage its
    device, its emulated compute seconds and transfer seconds in every iteration, and the
    bytes it sent; the trained weights under the whole model's names when asked for."""

    losses: tuple[float, ...]
    iteration_s: tuple[float, ...]
    devices: tuple[str, ...]
    compute_s: tuple[tuple[float, ...], ...]
    transfer_s: tuple[tuple[float, ...], ...]
    wire_bytes: tuple[int, ...]
    weights: Mapping[str, torch.Tensor] | None = None

    @property
    def mean_iteration_s(self) -> float:
        """Mean iteration time, the first (warm-up) iteration left out when there are more."""
        return _steady_mean(self.iteration_s)

    @property
    def mean_compute_s(self) -> float:
        """Compute seconds per iteration, all stages together (warm-up left out)."""
        return _steady_mean(tuple(np.sum(self.compute_s, axis=0)))

    @property
    def mean_transfer_s(self) -> float:
        """Transfer seconds per iteration, all stages together (warm-up left out)."""
        return _steady_mean(tuple(np.sum(self.transfer_s, axis=0)))


def _steady_mean(values: tuple[float, ...]) -> float:
    kept = values[1:] if len(values) > 1 else values
    return float(np.mean(kept)) if kept else 0.0


class ModelParallelTrainer:
    """Deploys ``model`` split at ``cuts`` on ``devices`` and trains it batch by batch.

    Parameters
    ----------
    runtime : RayRuntime
        The Ray instance hosting the cluster.
    model : nn.Sequential
        The model; partition ``k`` holds children ``cuts[k] .. cuts[k+1]-1``.
    cuts : sequence of int
        Partition boundaries (see ``split_sequential``).
    devices : sequence of str
        The device of each partition; several partitions may share a device (no transfer
        between them).
    optimizer, lr : str, float
        Each stage's optimizer ("sgd" or "adam") and learning rate.
    codec : ActivationCodec
        Compression of activations and gradients (raw float32 by default, as the
        environment's transfer sizes assume).
    memory_mb : sequence of int or None
        Memory each stage reserves on its device; default 64 MB plus 4x its weights.
    origin : str or None
        The device where the training batches originate (SROLE: the job's initiating node);
        the first stage waits their transfer time from there. ``None``: already local.
    links : mapping of (device, device) to Link, or None
        Links to use instead of the cluster's between those devices (a shared rate).
    """

    def __init__(self, runtime: RayRuntime, model: nn.Module, cuts: Sequence[int],
                 devices: Sequence[str], *, optimizer: str = "sgd", lr: float = 0.05,
                 codec: ActivationCodec | None = None,
                 memory_mb: Sequence[int] | None = None, origin: str | None = None,
                 links: Mapping[tuple[str, str], Link] | None = None,
                 startup_timeout_s: float = 300.0) -> None:
        if optimizer not in OPTIMIZERS or not lr > 0:
            raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)} with lr > 0, "
                              f"got {optimizer!r}, lr {lr}", field="optimizer")
        parts = split_sequential(model, tuple(cuts))
        if len(devices) != len(parts):
            raise ConfigError(f"{len(parts)} partitions need {len(parts)} devices, got "
                              f"{list(devices)}", field="devices")
        if memory_mb is not None and len(memory_mb) != len(parts):
            raise ConfigError("one memory reservation per partition", field="memory_mb")
        self.runtime, self.devices, self.cuts = runtime, tuple(devices), tuple(cuts)
        self.origin, self.links = origin, dict(links or {})
        self.codec = codec or ActivationCodec("none")
        self._step = 0
        tag = uuid.uuid4().hex[:6]
        self.stages: list[Any] = []
        for k, (part, device) in enumerate(zip(parts, self.devices, strict=True)):
            skeleton, weights = stage_payload(part)
            mem = memory_mb[k] if memory_mb is not None else 64 + math.ceil(
                4 * len(weights) / 2**20)
            options = runtime.member_options(device, int(mem), f"mp-{tag}-{k}")
            self.stages.append(spawn_member(
                TrainStage, options, f"mp-{tag}-{k}", device, skeleton, weights,
                runtime.stretch.get(device, 1.0), optimizer, lr, self.codec))
        try:
            ray.get([self._connect(k) for k in range(len(self.stages))],
                    timeout=startup_timeout_s)
        except BaseException:
            self.close()  # no actor outlives a failed deployment
            raise

    def _connect(self, k: int) -> Any:
        """Wire stage ``k`` to its neighbours' devices over the cluster's links."""
        here, n = self.devices[k], len(self.devices)

        def link(other: int) -> Any:
            if not 0 <= other < n or self.devices[other] == here:
                return None
            return self._link(here, self.devices[other])

        source = None
        if k == 0 and self.origin is not None and self.origin != here:
            source = self._link(self.origin, here)
        return self.stages[k].connect.remote(link(k - 1), link(k + 1), first=k == 0,
                                             last=k == n - 1, input_link=source)

    def _link(self, a: str, b: str) -> Link:
        return self.runtime.transport_link(a, b, self.links.get((a, b)))

    def step(self, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> tuple[float, float]:
        """One training iteration on the batch ``(x, y)``: the loss before the update and the
        wall seconds from sending the batch to the first stage until its backward is done."""
        meta = {"step": self._step, "labels": [int(v) for v in np.asarray(y).reshape(-1)]}
        frame = encode_activation(np.ascontiguousarray(x, dtype=np.float32), meta, self.codec)
        start = time.perf_counter()
        ref = self.stages[0].forward.remote(frame)
        for stage in self.stages[1:]:
            ref = stage.forward.remote(ref)
        for stage in reversed(self.stages[:-1]):
            ref = stage.backward.remote(ref)
        _, out = decode_activation(ray.get(ref))
        seconds = time.perf_counter() - start
        self._step += 1
        return float(out["loss"]), seconds

    def _per_stage(self, method: str) -> list[dict[str, torch.Tensor]]:
        frames = ray.get([getattr(s, method).remote() for s in self.stages])
        return [decode_state_dict(f) for f in frames]

    def _global(self, per_stage: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Stage-local names (``"1.weight"`` of partition k) as the whole model's names."""
        out: dict[str, torch.Tensor] = {}
        for start, tensors in zip(self.cuts, per_stage, strict=False):
            for name, value in tensors.items():
                child, _, rest = name.partition(".")
                out[f"{start + int(child)}.{rest}"] = value
        return out

    def gradients(self) -> dict[str, torch.Tensor]:
        """The last iteration's parameter gradients under the whole model's names."""
        return self._global(self._per_stage("gradients"))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The trained weights under the whole model's names."""
        return self._global(self._per_stage("weights"))

    def stats(self) -> list[dict[str, Any]]:
        """Per stage: compute and transfer seconds per iteration, frames and bytes sent."""
        return list(ray.get([s.stats.remote() for s in self.stages]))

    def close(self) -> None:
        """Kill the stage actors."""
        release_members(self.stages)
        self.stages = []


def train_model_parallel(runtime: RayRuntime, model: nn.Module, cuts: Sequence[int],
                         devices: Sequence[str], batches: Iterable[Batch], *,
                         on_step: OnStep | None = None, keep_weights: bool = False,
                         **options: Any) -> MPRun:
    """Deploy, train one iteration per batch, measure, tear down.

    ``options`` are :class:`ModelParallelTrainer`'s keyword arguments. ``on_step`` is
    called after each iteration (an exception it raises, e.g. a stop request, ends the
    training and still tears the stages down); ``keep_weights`` fetches the trained
    weights before the teardown. Returns the per-iteration losses and wall times, the
    per-stage compute, transfer and bytes (and the weights).
    """
    trainer = ModelParallelTrainer(runtime, model, cuts, devices, **options)
    try:
        losses, times = [], []
        for x, y in batches:
            loss, seconds = trainer.step(x, y)
            losses.append(loss)
            times.append(seconds)
            if on_step is not None:
                on_step(len(losses), loss, seconds)
        stats = trainer.stats()
        weights = trainer.state_dict() if keep_weights else None
    finally:
        trainer.close()
    return MPRun(tuple(losses), tuple(times), tuple(devices),
                 tuple(tuple(s["compute_s"]) for s in stats),
                 tuple(tuple(s["transfer_s"]) for s in stats),
                 tuple(int(s["wire_bytes"]) for s in stats), weights)


def run_placement(runtime: RayRuntime, network: EdgeNetwork, job: Job, placement: TaskPlacement,
                  model: nn.Module, cuts: Sequence[int], batches: Iterable[Batch],
                  **options: Any) -> MPRun:
    """Train ``model`` split at ``cuts`` (one part per ``job.partitions``, e.g. per model
    level) where ``placement`` puts the job's partitions, on a runtime started from
    ``network_cluster(network)``: one stage actor per :func:`stage_runs` run, on its node,
    reserving its partitions' ``memory_mb``; the batches originate at the job's origin node.

    Raises
    ------
    ConfigError
        The cuts, the job's partitions and the placement disagree in number.
    InfeasibleError
        The partitions placed on a node need more memory than it has.
    """
    n = len(job.partitions)
    if len(placement.nodes) != n or len(cuts) != n + 1:
        raise ConfigError(f"job {job.name!r} has {n} partitions; the placement has "
                          f"{len(placement.nodes)} hosts and the cuts {len(cuts) - 1} parts",
                          field="placement")
    memory = [max(1, math.ceil(p.memory_mb)) for p in job.partitions]
    for j in set(placement.nodes):
        need = sum(m for m, host in zip(memory, placement.nodes, strict=True) if host == j)
        if need > network.nodes[j].memory_mb:
            raise InfeasibleError(f"node {network.nodes[j].name} has "
                                  f"{network.nodes[j].memory_mb:g} MB; its partitions need "
                                  f"{need} MB")
    runs = stage_runs(placement)
    devices = [network.nodes[placement.nodes[a]].name for a, _ in runs]
    return train_model_parallel(runtime, model, [cuts[a] for a, _ in runs] + [cuts[-1]],
                                devices, batches, memory_mb=[sum(memory[a:b]) for a, b in runs],
                                origin=network.nodes[job.origin].name, **options)


def execute(runtime: RayRuntime, problem: Round, plan: Plan, /, *, model: nn.Module,
            cuts: Sequence[int], batches: Iterable[Batch], **options: Any) -> tuple[MPRun, ...]:
    """The executor of the anatomy: carry out ``plan`` (a policy's placement of every job of
    the round ``problem``) as real model-parallel training, one job after the other, each
    job ``model`` split at ``cuts`` (one part per job partition) and trained on ``batches``
    (:func:`run_placement`; ``options`` are :func:`train_model_parallel`'s: the trainer's,
    ``on_step``, ``keep_weights``). Its transfers run at the rates
    the environment computes for the whole round (:func:`shared_links`): the jobs run one
    at a time, and the background is not run, but each link carries what it would carry
    with everything running. ``runtime`` must hold ``network_cluster(problem.network)``.

    Raises
    ------
    ConfigError
        The plan does not have one placement per job.
    """
    if len(plan) != len(problem.jobs):
        raise ConfigError(f"{len(problem.jobs)} jobs need {len(problem.jobs)} placements, got "
                          f"{len(plan)}", field="plan")
    kept = list(batches) if len(problem.jobs) > 1 else batches  # one job: streamed
    return tuple(run_placement(runtime, problem.network, job, placement, model, cuts, kept,
                               links=shared_links(problem, plan, j), **options)
                 for j, (job, placement) in enumerate(zip(problem.jobs, plan, strict=True)))
