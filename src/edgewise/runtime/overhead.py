"""What the engine costs over bare PyTorch: one worker, no emulation, same everything else.

``single_worker_overhead_ratio`` trains a workload twice in one run: through the engine
(data store, parameter server and one worker as Ray actors, every batch's gradients pushed
and weights pulled as transport frames) and in a plain PyTorch loop in this process (same
model and seed, data, batch size, optimiser and one thread, like the worker). Both validate
after every epoch; the first epoch of each is a warm-up and not counted. The two alternate
epoch by epoch (the plain loop runs one epoch each time the engine finishes one, while the
engine's actors wait), and each engine epoch is paired with the plain epoch right after it.
The ratio is the median over the pairs of the engine's samples/s over the loop's, so that a
change in a shared host's load, or a burst of it, affects both sides of a pair alike or
only an outlying pair (the runtime bench uses medians over epochs for the same reason).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.models import make_optimizer
from edgewise.nn.workload import (
    Workload,
    build_model,
    loss,
    metric_hits,
    open_data,
    resolved,
    validate,
)
from edgewise.runtime.emulation import EmulationConfig
from edgewise.runtime.engine import train
from edgewise.runtime.plan import TrainConfig, TrainPlan
from edgewise.runtime.ray_cluster import start_local

__all__ = ["Overhead", "single_worker_overhead_ratio"]

_HOST = "host"
#: One device holding every role, as fast as the host (stretch 1) and links that take no
#: emulated time: what remains is the engine's own cost.
_CLUSTER = {
    "name": "overhead",
    "default_link": {"bandwidth_mbps": 1.0e9, "latency_ms": 0.0},
    "devices": [{"name": _HOST, "type": "jetson-nano", "speed": 1.0, "memory_mb": 8192,
                 "roles": ["worker", "parameter-server", "data-store", "manager"]}],
}


@dataclass(frozen=True, slots=True)
class Overhead:
    """Samples/s per counted epoch of both runs (engine epoch ``i`` paired with plain epoch
    ``i``), their medians and the median of the pairs' ratios (engine / plain)."""

    engine_samples_per_second: tuple[float, ...]
    plain_samples_per_second: tuple[float, ...]
    batch_size: int
    engine_val_accuracy: float
    plain_val_accuracy: float

    @property
    def pair_ratios(self) -> tuple[float, ...]:
        return tuple(e / p for e, p in zip(self.engine_samples_per_second,
                                           self.plain_samples_per_second, strict=True))

    @property
    def ratio(self) -> float:
        return float(np.median(self.pair_ratios))

    @property
    def engine_median(self) -> float:
        return float(np.median(self.engine_samples_per_second))

    @property
    def plain_median(self) -> float:
        return float(np.median(self.plain_samples_per_second))


class _PlainLoop:
    """The bare PyTorch loop: the same model, data, optimiser and batch, in this process."""

    def __init__(self, workload: Workload, config: TrainConfig, batch: int) -> None:
        source = open_data(workload, config.seed)
        train_set = source.read("train", np.arange(source.size("train")))
        val_set = source.read("val", np.arange(source.size("val")))
        self.x, self.y = torch.from_numpy(train_set.x), torch.from_numpy(train_set.y)
        self.vx, self.vy = torch.from_numpy(val_set.x), torch.from_numpy(val_set.y)
        self.model = build_model(workload, seed=config.seed)
        self.opt = make_optimizer(config.optimizer, self.model, config.learning_rate)
        self.workload, self.seed, self.batch, self.epoch = workload, config.seed, batch, 0
        self.accuracy = float("nan")

    def run(self, epochs: int) -> tuple[int, float]:
        """Train and validate ``epochs`` epochs; the samples trained and the seconds taken."""
        started = time.perf_counter()
        for _ in range(epochs):
            order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.y))
            self.epoch += 1
            self.model.train()
            for start in range(0, len(order), self.batch):
                index = order[start : start + self.batch]
                self.opt.zero_grad(set_to_none=True)
                value = loss(self.workload.task, self.model(self.x[index]), self.y[index])
                value.backward()  # type: ignore[no-untyped-call]
                self.opt.step()
            self.model.eval()
            with torch.no_grad():
                hits = metric_hits(self.workload.task, self.model(self.vx), self.vy)
            self.accuracy = hits / len(self.vy)
        return epochs * len(self.y), time.perf_counter() - started


def single_worker_overhead_ratio(workload: Workload, *, batch_size: int = 32, epochs: int = 3,
                                 learning_rate: float = 1e-3, seed: int = 0) -> Overhead:
    """Measure the engine's throughput against a plain loop's (see the module docstring).

    Starts (and shuts down) its own local Ray instance with one device; ``epochs`` pairs of
    epochs are counted after one warm-up epoch on each side.
    """
    cluster = cluster_from_dict(_CLUSTER, source="overhead")
    config = TrainConfig(workload=workload, mode="async", epochs=epochs + 1,
                         learning_rate=learning_rate, seed=seed, heartbeat_s=2.0,
                         worker_memory_mb=2048, evaluation="after")  # as the bare loop
    done = resolved(workload, validate(workload, seed=seed, batch_size=batch_size))
    n = open_data(done, seed).size("train")
    plan = TrainPlan({_HOST: n}, {_HOST: batch_size}, _HOST, _HOST, "overhead")
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # the worker's thread count
    try:
        loop_run = _PlainLoop(done, config, batch_size)
        plain: list[tuple[int, float]] = []  # plain[0], after engine epoch 0, is a warm-up

        def interleave(kind: str, data: dict[str, object]) -> None:
            if kind == "epoch_end":
                plain.append(loop_run.run(1))

        runtime = start_local(cluster, EmulationConfig(host_speed=1.0))
        try:
            result = train(runtime, config, plan, events=interleave)
        finally:
            runtime.shutdown()
    finally:
        torch.set_num_threads(previous)
    engine = tuple(len(r.applied_ids) / r.wall_seconds for r in result.epochs[1:])
    # plain[i] ran right after engine epoch i: a pair; both first epochs are warm-ups
    loop = tuple(samples / seconds for samples, seconds in plain[1:])
    pairs = min(len(engine), len(loop))
    return Overhead(engine[:pairs], loop[:pairs], batch_size, result.val_accuracy,
                    loop_run.accuracy)
