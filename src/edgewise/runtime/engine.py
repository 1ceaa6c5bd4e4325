"""Runs a model update on Ray: data store, parameter server and workers, epoch by epoch,
re-triggered from the last checkpoint when a worker or a device is lost (Deep-Edge §IV-D)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayError

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError, RuntimeFault
from edgewise.nn.data import shard_indices
from edgewise.nn.workload import Workload, resolved, validate
from edgewise.perf.convergence import epochs_to_target
from edgewise.runtime.datastore import DataStore
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.launch import (
    PS_PROBE_S,
    Attempt,
    Interrupted,
    await_all,
    launch,
    monitor_handle,
    ps_get,
)
from edgewise.runtime.limiting import Limiter, run_inline
from edgewise.runtime.plan import (
    STORE_MEMORY_MB,
    TrainConfig,
    TrainPlan,
    check_reservations,
    equal_plan,
    run_shards,
)
from edgewise.runtime.pscheckpoint import with_statistics
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.readings import evaluate_beside, evaluate_epoch
from edgewise.runtime.records import EpochRecord, Interruption, TrainResult, time_to_accuracy
from edgewise.runtime.shards import finished
from edgewise.runtime.shipping import Shipment, ship
from edgewise.wire.frames import TransportError, decode

__all__ = ["CALIBRATION_SAMPLES", "EpochRecord", "Interruption", "Replan", "TrainResult",
           "default_replan", "latest_checkpoint", "time_to_accuracy", "train"]

STORE_RESTARTS = 3
Replan = Callable[[Cluster, int, TrainPlan], TrainPlan]
Events = Callable[[str, dict[str, Any]], None]


#: Training samples the parameter server re-estimates BatchNorm statistics on.
CALIBRATION_SAMPLES = 256


def default_replan(cluster: Cluster, n_samples: int, previous: TrainPlan) -> TrainPlan:
    """Equal shards over the devices left, at the largest batch of the previous plan (the
    re-plan of a plan no policy made; a problem passes its own policy's)."""
    batch = max(previous.batch_sizes.values())
    return equal_plan(cluster, n_samples, batch)


def latest_checkpoint(path: Path | None) -> tuple[int, bytes] | None:
    """The newest ``epoch-NNNN.ewt`` under ``path``: (epochs it completes, its frame)."""
    found = sorted(path.glob("epoch-*.ewt")) if path is not None and path.is_dir() else []
    if not found:
        return None
    frame = found[-1].read_bytes()
    try:
        decode(frame)
    except TransportError as exc:
        raise ConfigError(f"the checkpoint {found[-1]} is corrupt ({exc}); remove it to "
                          "resume from the one before, or start the job anew",
                          field="checkpoint") from None
    return int(found[-1].stem.removeprefix("epoch-")) + 1, frame


def _save(path: Path | None, epoch: int, frame: bytes) -> Path | None:
    if path is None:
        return None
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"epoch-{epoch:04d}.ewt"
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(frame)
    tmp.replace(target)
    return target


def _unsaved(epoch: int, frame: bytes) -> None:
    """A checkpoint's save on landing, for an epoch whose reading is still to come."""


class _Job:
    """The state that survives attempts: checkpoint, records, strikes."""

    def __init__(self, runtime: RayRuntime, config: TrainConfig, ledger: StrikeLedger,
                 events: Events, checkpoint_dir: Path | None) -> None:
        self.runtime, self.config, self.ledger, self.events = runtime, config, ledger, events
        self.checkpoint_dir = checkpoint_dir
        self.job_id = uuid.uuid4().hex[:8]
        self.records: list[EpochRecord] = []
        self.interruptions: list[Interruption] = []
        self.checkpoint: bytes | None = None
        self.checkpoint_path: Path | None = None
        self.shipment: Shipment | None = None  # the last epoch's checkpoint, on its way
        self.transport: dict[str, dict[str, int]] = {}
        self.stopped_early = False
        self.workload: Workload | None = None
        self.done_before = 0  # epochs a resumed job had completed before this run
        self.reading: tuple[int, Any] | None = None  # an evaluation beside the next epoch
        self.unread: dict[int, bytes | None] = {}  # epochs read beside: their statistics

    @property
    def done(self) -> int:
        return self.done_before + len(self.records)

    def run_attempt(self, attempt: Attempt) -> None:
        try:
            self._epochs(attempt)
        finally:  # an interrupted attempt keeps the reading it may still have
            self._read(attempt, wait_s=PS_PROBE_S)

    def _epochs(self, attempt: Attempt) -> None:
        while self.done < self.config.epochs and not self.stopped_early:
            epoch = self.done
            self.events("epoch_start", {"epoch": epoch, "workers": attempt.plan.workers})
            t0 = time.perf_counter()
            ps_get(attempt, [s.begin_epoch.remote(epoch, list(attempt.workers))
                             for s in attempt.shards])
            futures = {w: h.run_epoch.remote(epoch) for w, h in attempt.workers.items()}
            stats = await_all(attempt, futures, self.config.heartbeat_s, self.events)
            self._read(attempt)  # the last epoch's evaluation, which ran beside this one
            beside = self.config.evaluation == "beside" and not self.stopped_early and \
                epoch + 1 < self.config.epochs
            # the evaluator measures first: the checkpoint keeps the statistics it measured
            # with (beside the next epoch: given to the checkpoint when it lands, _land)
            measured = {} if beside else evaluate_epoch(attempt, self.config.heartbeat_s,
                                                        self.events)
            reading = evaluate_beside(attempt) if beside else None
            self._land(attempt)  # the last epoch's checkpoint, fetched while this one ran
            statistics = measured.pop("statistics", None)
            out = finished(ps_get(attempt, [s.finish_epoch.remote(
                evaluate=False, statistics=statistics, keep_checkpoint=True)
                for s in attempt.shards])) | measured
            wall = time.perf_counter() - t0
            save: Callable[[int, bytes], Path | None] = partial(_save, self.checkpoint_dir)
            if reading is not None:  # saved once read (_land), with the statistics read with:
                self.unread[epoch], save = None, _unsaved  # a saved epoch's accuracy is known
            self.shipment = ship(attempt.shards, epoch, save, self.config.compression)
            ids = decode(out["applied_ids"]).arrays["ids"].copy()
            record = EpochRecord(epoch, out["val_accuracy"], wall, len(ids) / wall,
                                 attempt.plan.workers, ids, stats, out.get("push_seconds", 0.0),
                                 wall / self.runtime.time_dilation, out["staleness_mean"],
                                 int(out["staleness_max"]), out.get("noise_scale"),
                                 out.get("validation_seconds", 0.0),
                                 out.get("noise_scale_adam"),
                                 learning_rate=out.get("learning_rate"))
            self.records.append(record)
            if reading is not None:
                self.reading = (epoch, reading)
            else:
                self.events("epoch_end", {"epoch": epoch, "record": record})
                if self._reached_target():
                    break
        self._land(attempt)
        for w, h in attempt.workers.items():
            self.transport[w] = ray.get(h.bytes_sent.remote())

    def _read(self, attempt: Attempt, wait_s: float | None = None) -> None:
        """The reading of the epoch evaluated beside the next (``TrainConfig.evaluation``):
        its record takes the metric, and the seconds after its end until the metric was
        known. With ``wait_s`` (an attempt ending, perhaps interrupted) it waits at most
        that long and an evaluation lost with its worker leaves the metric NaN."""
        pending, self.reading = self.reading, None
        if pending is None:
            return
        epoch, ref = pending
        try:
            measured = dict(ray.get(ref, timeout=wait_s)) if wait_s is not None else \
                await_all(attempt, {attempt.evaluator: ref}, self.config.heartbeat_s,
                          self.events)[attempt.evaluator]
        except (RayError, TimeoutError):
            measured = {"val_accuracy": float("nan"), "validation_seconds": 0.0}
        at = [i for i, r in enumerate(self.records) if r.epoch == epoch]
        if not at:  # dropped with its checkpoint (_land)
            return
        record = replace(self.records[at[0]], val_accuracy=measured["val_accuracy"],
                         validation_seconds=measured["validation_seconds"],
                         reading_device_seconds=measured["validation_seconds"]
                         / self.runtime.time_dilation)
        self.records[at[0]] = record
        if epoch in self.unread:
            self.unread[epoch] = measured.get("statistics")
        self.events("epoch_end", {"epoch": epoch, "record": record})
        if wait_s is None:
            self._reached_target()

    def _reached_target(self) -> bool:
        """Accuracy monitor: re-estimate the epochs needed; True once the target is met."""
        target = self.config.target_accuracy
        if target is None:
            return False
        accuracies = [r.val_accuracy for r in self.records]
        needed = epochs_to_target(accuracies, target)
        self.events("estimate", {"epochs_needed": needed, "target": target})
        self.stopped_early = self.stopped_early or accuracies[-1] >= target
        return self.stopped_early

    def _land(self, attempt: Attempt | None) -> None:
        """Wait for the checkpoint on its way (``runtime.shipping``) and save it. A server
        lost before it left takes its epoch along: the record is dropped and the next
        attempt runs the epoch again; with ``attempt`` the loss interrupts it (Interrupted),
        without (an attempt already interrupted) the wait is at most ``PS_PROBE_S``."""
        shipment, self.shipment = self.shipment, None
        if shipment is None:
            return
        try:
            frame, path = shipment.landed(None if attempt is not None else PS_PROBE_S)
        except (RayError, TimeoutError):
            self.records = [r for r in self.records if r.epoch < shipment.epoch]
            self.stopped_early = False
            self.events("epoch_lost", {"epoch": shipment.epoch})
            if attempt is not None:
                ps_get(attempt, shipment.ref, timeout_s=0)  # the server's loss: Interrupted
            return
        if shipment.epoch in self.unread:  # read beside: saved now that its reading is in
            statistics = self.unread.pop(shipment.epoch)
            if statistics is not None:
                frame = with_statistics(frame, statistics, self.config.compression)
            path = _save(self.checkpoint_dir, shipment.epoch, frame)
        self.checkpoint, self.checkpoint_path = frame, path
        self.events("checkpoint", {"epoch": shipment.epoch, "path": path})

    def interrupted(self, lost: Interrupted) -> None:
        self._land(None)
        epoch = self.done
        for device, member, reason in lost.members:
            count = self.ledger.strike(device)
            item = Interruption(device, member, reason, epoch, lost.detected_at, count)
            self.interruptions.append(item)
            self.events("interrupted", {"interruption": item})


def train(runtime: RayRuntime, config: TrainConfig, plan: TrainPlan, *,
          ledger: StrikeLedger | None = None, replan: Replan = default_replan,
          events: Events | None = None, checkpoint_dir: Path | None = None,
          resume: bool = False, limited: Limiter = run_inline) -> TrainResult:
    """Train ``config.epochs`` epochs of the config's workload under ``plan``; on a lost
    worker or device stop the others, strike the device, re-plan without struck-out devices
    and resume from the last checkpoint. With ``resume``, start from the newest checkpoint
    in ``checkpoint_dir`` (a job the manager restarted): only the epochs after it run.

    The workload is validated on the driver first (files, data, classes, one batch through
    the model, memory), so that a bad spec fails with a ConfigError before any actor starts;
    through ``limited`` (the manager's: in a child process, so that the driver does not
    hold a copy of the network). Raises RuntimeFault after ``config.max_restarts`` restarts."""
    started = time.perf_counter()
    check_reservations(runtime.cluster, plan, config.worker_memory_mb,
                       run_shards(runtime.cluster, plan, config))
    workload = limited(checked_workload, runtime.cluster, config, plan)
    ledger = ledger or StrikeLedger()
    job = _Job(runtime, config, ledger, events or (lambda kind, data: None), checkpoint_dir)
    job.workload = workload
    if resume and (found := latest_checkpoint(checkpoint_dir)) is not None:
        job.done_before, job.checkpoint = found
        job.events("resumed", {"epoch": job.done_before})
    monitor = monitor_handle(runtime, config.heartbeat_s)
    # The store rebuilds the same shards from the workload and seed, so a store that died is
    # restarted by Ray and its calls retried, instead of failing the job.
    options = {**runtime.actor_options(plan.store_device, STORE_MEMORY_MB,
                                       name=f"store-{job.job_id}"),
               "max_restarts": STORE_RESTARTS, "max_task_retries": -1}
    store = DataStore.options(**options).remote(  # type: ignore[attr-defined]
        workload, config.seed, config.compression, config.chunk_bytes)
    try:
        plan = _attempts(job, plan, store, monitor, replan)
        shipped: dict[str, int] = ray.get(store.shipped.remote())
    finally:
        ray.kill(store, no_restart=True)
    return TrainResult(job.job_id, tuple(job.records), tuple(job.interruptions), plan,
                       dict(ledger.counts), shipped, job.transport, job.checkpoint_path,
                       time.perf_counter() - started, job.stopped_early)


def checked_workload(cluster: Cluster, config: TrainConfig, plan: TrainPlan) -> Workload:
    """The config's workload after its dry run, with the shape and classes it found filled
    in; the memory check uses the largest planned batch and the smallest worker."""
    workload = config.resolved_workload()
    batch = max(plan.batch_sizes.values(), default=1)
    memory = min((cluster.device(w).memory_mb for w in plan.workers), default=None)
    return resolved(workload, validate(workload, seed=config.seed, batch_size=batch,
                                       memory_mb=memory))


def _attempts(job: _Job, plan: TrainPlan, store: Any, monitor: Any, replan: Replan) -> TrainPlan:
    """Run attempts until every epoch is done; returns the plan the last attempt ran."""
    runtime, config, ledger = job.runtime, job.config, job.ledger
    checked = plan  # its reservations were checked before the store started
    n_samples: int = ray.get(store.size.remote())
    plan.validate(runtime.cluster, n_samples)
    validation: list[bytes] = ray.get(store.validation.remote())
    chunk_samples: int = ray.get(store.chunk_samples.remote())
    calibration: list[bytes] = ray.get(store.calibration.remote(CALIBRATION_SAMPLES,
                                                                config.seed))
    struck = ledger.struck_out(plan.workers)
    if struck:  # three strikes already: this job's first plan must do without them
        plan = replan(runtime.cluster.without(ledger.struck_out()), n_samples, plan)
        job.events("restart", {"restart": 0, "plan": plan, "excluded": sorted(struck)})
    for restart in range(config.max_restarts + 1):
        rng = np.random.default_rng([config.seed, restart])
        positions = shard_indices(n_samples, dict(plan.shards), rng)
        shards = run_shards(runtime.cluster, plan, config)
        if plan is not checked:  # a new plan (``train`` checked the first one)
            check_reservations(runtime.cluster, plan, config.worker_memory_mb, shards)
            checked = plan
        attempt: Attempt | None = None
        try:  # a member lost while the shards load is a fault like any other
            attempt = launch(runtime, replace(config, ps_shards=shards), plan, job.job_id,
                             restart, monitor, store, positions, validation, job.checkpoint,
                             job.events, workload=job.workload, chunk_samples=chunk_samples,
                             calibration=calibration)
            job.run_attempt(attempt)
            return plan
        except Interrupted as lost:
            job.interrupted(lost)
            if attempt is not None:
                attempt.teardown()
            # struck out, or gone for now (dead or unreachable): a plan on them would hang
            excluded = ledger.struck_out(runtime.cluster.device_names) | runtime.lost_devices()
            healthy = runtime.cluster.without(excluded)
            plan = replan(healthy, n_samples, plan)
            job.events("restart", {"restart": restart + 1, "plan": plan})
        finally:
            if attempt is not None:
                attempt.teardown()
    raise RuntimeFault(f"gave up after {config.max_restarts} restarts")
