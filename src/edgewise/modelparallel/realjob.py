"""One model-parallel training job assembled for real, the same way wherever it is run
(`edgewise modelparallel run`, the manager's ``modelparallel`` job): the model as a chain of
levels (the bench CNN, or a workload's model cut at its level boundaries by the graph
analysis of ``jobs.model_profile``), the environment's ``Job`` for it, its data batches,
and the training itself by the one executor, :func:`edgewise.modelparallel.run.execute`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.modelparallel.emulated import cluster_network
from edgewise.modelparallel.jobs import check_model, make_job, model_profile
from edgewise.modelparallel.problem import EdgeNetwork, Job, TaskPlacement
from edgewise.modelparallel.realbench import (
    BENCH_BATCH,
    BENCH_WIDTH,
    LR,
    OPTIMIZER,
    bench_model,
    digits_batches,
    sequential_job,
    sequential_levels,
    spread_placement,
)
from edgewise.modelparallel.run import Batch, MPRun, OnStep, execute
from edgewise.modelparallel.schedule import Round
from edgewise.nn.data import digits_split
from edgewise.nn.partition import partition_model
from edgewise.nn.workload import Workload, build_model, example_input, open_data, resolved, validate
from edgewise.runtime.ray_cluster import RayRuntime, head_device

__all__ = ["Levels", "accuracy", "bench_job", "bench_levels", "checked_workload",
           "spread_training", "train_job", "training_batches", "workload_job",
           "workload_levels"]

_VAL_LIMIT = 2048  # validation samples scored at most
_EVAL_BATCH = 256


@dataclass(frozen=True, slots=True, eq=False)
class Levels:
    """A model as the executor trains it: an ``nn.Sequential`` whose children ``cuts[k] ..
    cuts[k+1]-1`` are model level ``k`` (one partition of the environment's job each)."""

    label: str
    model: nn.Sequential
    cuts: tuple[int, ...]


def bench_levels(seed: int = 0, width: int = 16) -> Levels:
    """The bench CNN (``bench_model``: the digits CNN as an ``nn.Sequential``) and its four
    levels (``sequential_levels``)."""
    model = bench_model(seed, width)
    return Levels("digits-cnn", model, sequential_levels(model))


def bench_job(levels: Levels, origin: int, batch: int, iterations: int = 50) -> Job:
    """The environment's job of the bench CNN's ``levels`` (:func:`bench_levels`) from node
    ``origin``, for batches of ``batch``: ``sequential_job`` sized from one example (an
    activation counted once per sample, times ``batch``), as ``make_job`` sizes a
    workload's job and the bench sizes its own."""
    return sequential_job(levels.model, levels.cuts, torch.zeros(1, 1, 8, 8), batch, origin,
                          n_iterations=iterations)


def checked_workload(workload: Workload, seed: int = 0) -> Workload:
    """``workload`` checked by the dry run (its data read, one batch through the model,
    backward included) and its levels traced (``jobs.check_model``), with what the dry run
    found filled in (input shape, classes): what :func:`workload_levels` and
    :func:`workload_job` take.

    Raises
    ------
    ConfigError
        Naming the workload's field: a bad model, data, shape or classes, or a model that
        cannot be traced into levels.
    """
    done = resolved(workload, validate(workload, seed=seed))
    check_model(done)
    return done


def workload_levels(workload: Workload, seed: int = 0) -> Levels:
    """A checked workload's model (:func:`checked_workload`; its weights if it names them,
    else initialised from ``seed``) cut at the boundaries of its levels, each level one
    child: a traced stage module (``nn.partition``) from one level's input to its output.
    Traced in eval mode, as ``jobs.model_profile`` traces it: dropout and batch-norm
    statistics are those of inference; every weight trains.

    Raises
    ------
    ConfigError
        A level ends at a value that is not one tensor (it cannot be sent to the next stage).
    """
    model = build_model(workload, seed=seed).eval()
    traced = partition_model(workload.label, model, example_input(workload, seed=seed))
    bounds = [0]
    for label in model_profile(workload).labels:
        if label not in traced.points:
            raise ConfigError(f"level boundary {label} is not one tensor: the model cannot be "
                              "trained split into its levels", field="model")
        bounds.append(traced.points.index(label))
    stages = [traced.stage(a, b) for a, b in pairwise(bounds)]
    return Levels(workload.label, nn.Sequential(*stages), tuple(range(len(stages) + 1)))


def workload_job(workload: Workload, origin: int, batch: int, iterations: int) -> Job:
    """The environment's job of a checked workload from node ``origin``: one partition per
    level, as `modelparallel place` makes a workload's jobs (``jobs.make_job``)."""
    return make_job(workload.label, workload, origin, batch=batch, n_iterations=iterations)


def training_batches(workload: Workload | None, batch: int, iterations: int,
                     seed: int = 0) -> Iterator[Batch]:
    """``iterations`` training batches epoch by epoch in an order drawn from ``seed``: the
    digits (``digits_batches``) without a workload, else the workload's training split."""
    if workload is None:
        yield from digits_batches(batch, iterations, seed)
        return
    source = open_data(workload, seed)
    rng = np.random.default_rng(seed)
    order, at, n = rng.permutation(source.size("train")), 0, source.size("train")
    for _ in range(iterations):
        if at + batch > n:
            order, at = rng.permutation(n), 0
        data = source.read("train", order[at:at + batch].astype(np.int64))
        at += batch
        yield data.x.astype(np.float32), data.y.astype(np.int64)


def _validation(workload: Workload | None, seed: int) -> tuple[torch.Tensor, np.ndarray[Any, Any]]:
    if workload is None:
        val = digits_split()[1]
        return torch.from_numpy(val.x), val.y
    source = open_data(workload, seed)
    data = source.read("val", np.arange(min(source.size("val"), _VAL_LIMIT), dtype=np.int64))
    return torch.from_numpy(data.x.astype(np.float32)), data.y


def accuracy(levels: Levels, weights: Mapping[str, torch.Tensor], workload: Workload | None,
             seed: int = 0) -> float:
    """Top-1 accuracy of ``levels.model`` with the trained ``weights`` on the validation
    split (the digits', or the workload's, at most 2,048 samples)."""
    levels.model.load_state_dict(dict(weights))
    x, y = _validation(workload, seed)
    if len(y) == 0:
        return float("nan")
    with torch.no_grad():
        model = levels.model.eval()
        predicted = torch.cat([model(x[i:i + _EVAL_BATCH]).argmax(dim=1)
                               for i in range(0, len(x), _EVAL_BATCH)]).numpy()
    return float(np.mean(predicted == y))


def train_job(runtime: RayRuntime, network: EdgeNetwork, job: Job, placement: TaskPlacement,
              levels: Levels, batches: Iterator[Batch], *, optimizer: str = OPTIMIZER,
              lr: float = LR, on_step: OnStep | None = None,
              keep_weights: bool = False) -> MPRun:
    """Train ``levels`` for real where ``placement`` puts ``job``'s partitions (one per
    level), alone on ``network``: :func:`run.execute` of the one-job round."""
    return execute(runtime, Round(network, (job,)), (placement,), model=levels.model,
                   cuts=levels.cuts, batches=batches, optimizer=optimizer, lr=lr,
                   on_step=on_step, keep_weights=keep_weights)[0]


def spread_training(runtime: RayRuntime, origin: str = "", iterations: int = 20,
                    seed: int = 0, workload: Workload | None = None) -> MPRun:
    """What `edgewise modelparallel run` trains: the bench CNN (``BENCH_WIDTH``, batch
    ``BENCH_BATCH``), or a checked workload's model (:func:`checked_workload`), its levels
    spread from ``origin`` (default: the head device) over the runtime's devices
    (``spread_placement`` on ``emulated.cluster_network``), Adam at ``LR``.

    Raises
    ------
    ConfigError
        The cluster has no device ``origin``.
    """
    cluster = runtime.cluster
    start = origin or head_device(cluster).name
    if start not in cluster.device_names:
        raise ConfigError(f"the cluster has no device {start!r}", field="origin")
    network = cluster_network(cluster)
    index = cluster.device_names.index(start)
    if workload is None:
        levels = bench_levels(seed, BENCH_WIDTH)
        job = bench_job(levels, index, BENCH_BATCH, iterations)
    else:
        levels = workload_levels(workload, seed)
        job = workload_job(workload, index, BENCH_BATCH, iterations)
    return train_job(runtime, network, job, spread_placement(network, job), levels,
                     training_batches(workload, BENCH_BATCH, iterations, seed))
