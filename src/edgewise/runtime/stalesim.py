"""The asynchronous loop in one process, in simulated time: the parameter server's own code
(``FlatState`` frames, ``StaleApplier``, the optimiser, BatchNorm re-estimation) driven by
workers whose batches finish when their simulated compute says (``seconds_per_sample``), so
that the order of pushes, and with it the staleness, is that of a plan's devices. It is
deterministic for a seed, needs no Ray, and is how the staleness treatments were compared
(docs/runtime.md); the engine runs the same server logic over Ray."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgewise.nn.models import epoch_lr, make_optimizer
from edgewise.nn.workload import (
    Workload,
    build_model,
    build_network,
    loss,
    metric_hits,
    open_data,
    resolved,
    validate,
)
from edgewise.runtime.asyncapply import StaleApplier
from edgewise.runtime.balance import epoch_batches
from edgewise.runtime.staleness import Treatment
from edgewise.runtime.trainstate import FlatState

__all__ = ["SimResult", "SimWorker", "simulate_async"]


@dataclass(frozen=True, slots=True)
class SimWorker:
    """A worker's shard, batch and simulated compute per sample."""

    name: str
    shard: int
    batch: int
    seconds_per_sample: float


@dataclass(frozen=True, slots=True)
class SimResult:
    accuracies: tuple[float, ...]
    staleness_mean: tuple[float, ...]


class _Sim:
    def __init__(self, workload: Workload, workers: Sequence[SimWorker], treatment: Treatment,
                 lr: float, seed: int) -> None:
        torch.manual_seed(seed)
        workload = resolved(workload, validate(workload, seed=seed))
        source = open_data(workload, seed)
        n = source.size("train")
        train = source.read("train", np.arange(n, dtype=np.int64))
        val = source.read("val", np.arange(source.size("val"), dtype=np.int64))
        self.x, self.y = torch.from_numpy(train.x), torch.from_numpy(train.y)
        self.vx, self.vy = torch.from_numpy(val.x), torch.from_numpy(val.y)
        self.task, self.workers = workload.task, list(workers)
        self.rng = np.random.default_rng(seed)
        cuts = np.cumsum([0, *(w.shard for w in workers)])
        order = self.rng.permutation(n)
        self.shards = {w.name: order[a:b] for w, a, b in zip(workers, cuts, cuts[1:], strict=False)}
        model = build_model(workload, seed=seed, num_classes=workload.task.num_classes,
                            input_shape=workload.task.input_shape)
        self.server = FlatState(model)
        self.opt = make_optimizer("adam", self.server.optimizer_parameters().values(), lr)
        self.applier = StaleApplier(treatment, self.server, self.opt)
        self.replicas = {w.name: FlatState(build_network(
            workload, seed=seed, num_classes=workload.task.num_classes,
            input_shape=workload.task.input_shape).train()) for w in workers}
        self.calib = self.x[self.rng.choice(n, size=min(256, n), replace=False)]

    def pull(self, name: str) -> None:
        self.applier.hand_out(name)
        frame = self.server.weights_frame("none", {"updates": self.applier.ledger.version})
        self.replicas[name].load_weights(frame)

    def push(self, name: str, index: np.ndarray, base: int) -> None:
        rep = self.replicas[name]
        rep.zero_grad()
        loss(self.task, rep.model(self.x[index]), self.y[index]).backward()  # type: ignore[no-untyped-call]
        rep.check_grads()
        pushed = self.server.read_push(rep.gradients_frame(index.astype(np.int64), "none", base))
        flats, factor = self.applier.treat(pushed)
        for group in self.opt.param_groups:
            group["lr"] = self.lr * factor
        before = {k: v.clone() for k, v in self.server.flats.items() if k.startswith("p.")}
        self.server.apply_push(flats)
        self.opt.step()
        self.applier.observe_step(before)

    lr = 0.0

    def epoch(self) -> None:
        """One epoch in simulated time; SSP holds replies as the server does."""
        batches = {w.name: epoch_batches(self.rng.permutation(self.shards[w.name]), w.batch)
                   for w in self.workers}
        speed = {w.name: w.seconds_per_sample for w in self.workers}
        clock = dict.fromkeys(batches, 0)
        base: dict[str, int] = {}
        events: list[tuple[float, str]] = []
        held: list[str] = []
        for w in batches:
            self.pull(w)
            base[w] = self.applier.ledger.version
            heapq.heappush(events, (speed[w] * len(batches[w][0]), w))
        while events:
            now, w = heapq.heappop(events)
            self.push(w, batches[w][clock[w]], base[w])
            clock[w] += 1
            held.append(w)
            active = [c for v, c in clock.items() if c < len(batches[v])]
            for v in list(held):
                bound = self.applier.treatment.ssp_bound
                if self.applier.treatment.name == "ssp" and active and \
                        clock[v] - min(active) > bound and clock[v] < len(batches[v]):
                    continue
                held.remove(v)
                if clock[v] < len(batches[v]):
                    self.pull(v)
                    base[v] = self.applier.ledger.version
                    heapq.heappush(events, (now + speed[v] * len(batches[v][clock[v]]), v))

    def accuracy(self) -> float:
        model = self.server.model
        torch.optim.swa_utils.update_bn([self.calib], model)
        model.eval()
        with torch.no_grad():
            hits = metric_hits(self.task, model(self.vx), self.vy)
        model.train()
        return hits / len(self.vy)


def simulate_async(workload: Workload, workers: Sequence[SimWorker], treatment: Treatment,
                   epochs: int, lr: float, seed: int = 0,
                   schedule: str = "cosine",
                   on_epoch: Callable[[int, float, float], None] | None = None) -> SimResult:
    """Train ``epochs`` asynchronous epochs; the validation accuracy and mean staleness of
    each (BatchNorm statistics re-estimated on 256 training samples before evaluating)."""
    sim = _Sim(workload, workers, treatment, lr, seed)
    accs, stale = [], []
    for e in range(epochs):
        sim.lr = epoch_lr(lr, schedule, e, epochs)
        sim.applier.ledger.reset()
        sim.epoch()
        accs.append(sim.accuracy())
        stale.append(sim.applier.ledger.mean)
        if on_epoch is not None:
            on_epoch(e, accs[-1], stale[-1])
    return SimResult(tuple(accs), tuple(stale))
