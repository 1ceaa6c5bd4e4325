"""Launching one attempt of a run (parameter server + workers) and watching it for faults."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError, RayError

from edgewise.errors import ConfigError
from edgewise.nn.workload import Workload
from edgewise.runtime.balance import balanced_steps, batch_warmup
from edgewise.runtime.faults import progress_poll_s
from edgewise.runtime.members import (
    MemberSpec,
    Server,
    server_links,
    start_ps,
    start_servers,
    start_worker,
)
from edgewise.runtime.memwatch import PROBE_TIMEOUT_S, SILENT_PROBE_S, MemoryWatch
from edgewise.runtime.monitor import MONITOR_NAME, HealthMonitor
from edgewise.runtime.plan import TrainConfig, TrainPlan
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.vessel import HostedMember
from edgewise.runtime.vessel_pool import release_members

__all__ = ["PS_PROBE_S", "Attempt", "Interrupted", "MemberSpec", "await_all",
           "evaluator_device", "launch",
           "monitor_handle", "ps_get",
           "settle", "start_ps", "start_worker"]


class Interrupted(Exception):
    """Members of a run were lost: (device, member, reason) each, and when it was seen."""

    def __init__(self, members: list[tuple[str, str, str]], detected_at: float) -> None:
        super().__init__("; ".join(f"{m} on {d}: {r}" for d, m, r in members))
        self.members, self.detected_at = members, detected_at


@dataclass
class Attempt:
    """The actors of one attempt at a run."""

    plan: TrainPlan
    servers: list[Server]  # (device, member name, handle): the server, or its shards in order
    workers: dict[str, Any]
    monitor: Any
    names: dict[str, str] = field(default_factory=dict)  # worker device -> member name
    closed: bool = False
    memory: MemoryWatch | None = None  # the devices' OOM kills at the start (not emulated)
    evaluator: str = ""  # the worker device that measures each epoch's validation metric
    outstanding: list[Any] = field(default_factory=list)  # calls left running by a fault
    watch: Any = None  # the monitor's long poll for this attempt's dead (see await_all)

    @property
    def ps(self) -> Any:
        """The server, or its first shard (which answers for the run's progress)."""
        return self.servers[0][2]

    @property
    def ps_name(self) -> str:
        return self.servers[0][1]

    @property
    def shards(self) -> list[Any]:
        """The handles of the run's parameter servers: the server, or its shards in order
        (``runtime.shards``)."""
        return [handle for _, _, handle in self.servers]

    def lost_reason(self, device: str, otherwise: str,
                    timeout_s: float = PROBE_TIMEOUT_S) -> str:
        """Why ``device``'s member was lost: out of its memory if the kernel ended it there,
        else ``otherwise``."""
        found = self.memory.reason(device, timeout_s) if self.memory is not None else None
        return found or otherwise

    def teardown(self) -> None:
        """Stop every actor of this attempt (the survivors of a fault too)."""
        if self.closed:
            return
        self.closed = True
        for member in (*self.names.values(), *(name for _, name, _ in self.servers)):
            self.monitor.unregister.remote(member)
        release_members([*self.workers.values(), *self.shards])
        settle(self.outstanding)
        self.outstanding = []


SETTLE_S = 10.0
"""How long a torn-down attempt waits for the calls a fault left running (a survivor's epoch
whose server went away) to end, once their members are released."""


def settle(refs: list[Any], timeout_s: float = SETTLE_S) -> None:
    """Collect the results of calls nobody will read (they fail once their members are gone),
    so that Ray does not print each failure as an unhandled error when they are dropped."""
    if not refs:
        return
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for ref in done:
        with contextlib.suppress(RayError):
            ray.get(ref)


def monitor_handle(runtime: RayRuntime, heartbeat_s: float) -> Any:
    """The cluster's health monitor, started on the manager device if not running yet."""
    managers = [d.name for d in runtime.cluster.devices if "manager" in d.roles]
    device = managers[0] if managers else runtime.cluster.devices[-1].name
    options = runtime.actor_options(device, 64, name=MONITOR_NAME)
    return HealthMonitor.options(**options, get_if_exists=True, lifetime="detached").remote(  # type: ignore[attr-defined]
        heartbeat_s)


def evaluator_device(runtime: RayRuntime, plan: TrainPlan) -> str:
    """The worker that evaluates each epoch: the fastest device (the cluster's nominal
    speed; the first such in the plan's order on a tie). The parameter server sits where
    the cluster puts it, in Deep-Edge's testbed on a Raspberry Pi, the slowest device of
    all: evaluating there made the validation pass the longest part of an epoch."""
    return max(plan.workers, key=lambda w: runtime.cluster.device(w).speed)


def launch(runtime: RayRuntime, config: TrainConfig, plan: TrainPlan, job_id: str,
           attempt: int, monitor: Any, store: Any, positions: dict[str, np.ndarray],
           validation: bytes | list[bytes], checkpoint: bytes | None, events: Any, *,
           workload: Workload | None = None, chunk_samples: int | None = None,
           calibration: list[bytes] | None = None) -> Attempt:
    """Start the parameter server and one worker per planned device; ship the shards in
    chunks of ``chunk_samples``. ``workload`` defaults to the config's. The ``sync`` loop
    runs balanced steps (``runtime.balance``), its learning rate scaled to their global
    batch from ``config.lr_reference_batch`` (a raised rate warming up); the treated
    ``async`` loop scales each push's step by its batch over the plan's
    smallest (``Treatment.batch_reference``)."""
    spec = MemberSpec.of(config, workload)
    batches, steps = dict(plan.batch_sizes), 0
    if spec.treatment.name != "none":  # a sample weighs the same whichever batch it was in
        smallest = min(plan.batch_sizes[w] for w in plan.workers)
        spec = replace(spec, treatment=replace(spec.treatment, batch_reference=smallest))
    if config.mode == "sync":
        balanced = balanced_steps(plan.shards, plan.batch_sizes, config.optimizer,
                                  config.lr_reference_batch)
        batches, steps = dict(balanced.batch_sizes), balanced.steps
        warmup = batch_warmup(balanced.lr_factor, config.epochs)
        spec = replace(spec, learning_rate=spec.learning_rate * balanced.lr_factor,
                       warmup=warmup)
        events("balanced", {"steps": steps, "batch_sizes": batches,
                            "lr_factor": balanced.lr_factor,
                            "warmup_epochs": round(warmup.epochs, 3)})
    ps_name = f"ps-{job_id}-{attempt}"
    memory = MemoryWatch.start(runtime, [*plan.workers, plan.ps_device])
    # the server only checkpoints: the evaluating worker holds the validation set and the
    # calibration batches (evaluate_epoch), so the server decodes neither
    servers = start_servers(runtime, spec, plan, ps_name, config.shards, checkpoint)
    run = Attempt(plan, servers, {}, monitor, memory=memory)
    for w in plan.workers:
        name = f"worker-{job_id}-{attempt}-{w}"
        run.names[w] = name
        run.workers[w] = start_worker(
            runtime, spec, w, name, ps=run.shards, ps_link=server_links(runtime, w, servers),
            store_link=runtime.transport_link(w, plan.store_device),
            batch_size=batches[w], monitor=monitor, sync=config.mode == "sync", steps=steps)
    loads = {w: h.load_shard.remote(store, positions[w], chunk_samples)
             for w, h in run.workers.items()}
    run.evaluator = evaluator_device(runtime, plan)
    try:
        await_all(run, loads, config.heartbeat_s, events)
        frames = validation if isinstance(validation, list) else [validation]
        evaluator = run.workers[run.evaluator]
        await_all(run, {run.evaluator: evaluator.set_evaluation.remote(
            frames, calibration or [], config.evaluation == "beside",
            idle=not runtime.emulated)},
                  config.heartbeat_s, events)
    except BaseException:
        run.teardown()
        raise
    return run


def _lost(run: Attempt, dead: list[tuple[str, str, str, float]]) -> list[tuple[str, str, str]]:
    """The attempt's dead, as the monitor's long poll returned them (only its members and
    its devices' agents, :func:`_watch`), each with why it was lost."""
    return [(device, name, run.lost_reason(device, f"no heartbeat for {silence:.1f} s",
                                           SILENT_PROBE_S))
            for name, _, device, silence in dead]


DEAD_PROBE_S = 5.0
"""How long an interruption asks the attempt's other members whether their processes live."""


def _alive_ref(handle: Any) -> Any:
    """A call that fails at once if ``handle``'s process (a hosted member's vessel) died."""
    actor = handle.vessel if isinstance(handle, HostedMember) else handle
    return actor.__ray_ready__.remote()


def with_the_dead(run: Attempt, lost: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """``lost`` and every other member of the attempt whose process is gone: an attempt is
    interrupted at its first sign of a loss (a member silent past its heartbeats, a failed
    call), and on a loaded host that may be another member's silence before a killed
    member's; each member that died is its device's fault all the same, and struck."""
    seen = {name for _, name, _ in lost}
    others = [(d, run.names.get(d, d), h) for d, h in run.workers.items()]
    others.extend(run.servers)
    refs = {_alive_ref(h): (d, name) for d, name, h in others if name not in seen}
    if not refs:
        return lost
    answered, _ = ray.wait(list(refs), num_returns=len(refs), timeout=DEAD_PROBE_S)
    dead = []
    for ref in answered:
        try:
            ray.get(ref)
        except RayActorError:
            device, name = refs[ref]
            dead.append((device, name, run.lost_reason(device, "its process died",
                                                       SILENT_PROBE_S)))
    return [*lost, *dead]


PS_PROBE_S = 30.0
"""How long a worker's failure waits for the parameter server to answer before the server,
not the worker, is taken for lost (a loaded host answers in well under a second)."""


def _failed(ref: Any) -> bool:
    """Whether the call ``ref`` has ended with an error (False while it runs)."""
    ready, _ = ray.wait([ref], timeout=0)
    if not ready:
        return False
    try:
        ray.get(ref)
    except RayError:
        return True
    return False


def ps_get(run: Attempt, ref: Any, timeout_s: float | None = None, server: int = 0) -> Any:
    """``ray.get`` of a parameter-server call, or of a list of them, one to each of the
    run's servers in order; a server that died (or does not answer within ``timeout_s``)
    interrupts the attempt, with the server's device to strike: of a list, those whose
    calls failed; else ``server``, the one asked."""
    try:
        return ray.get(ref, timeout=timeout_s)
    except RayError as exc:
        failed = [i for i, r in enumerate(ref) if _failed(r)] if isinstance(ref, list) else []
        lost = [(device, name, run.lost_reason(device, "parameter server lost: "
                                               + type(exc).__name__))
                for device, name, _ in (run.servers[i] for i in failed or [server])]
        raise Interrupted(with_the_dead(run, lost), time.time()) from None


WATCH_PERIODS = 10.0
"""How many heartbeat periods one long poll of the monitor lasts before it is asked again."""


def _watch(run: Attempt, heartbeat_s: float) -> Any:
    """The attempt's outstanding long poll for its dead members (one per attempt, kept
    across calls of :func:`await_all`; the last is left to time out in the monitor)."""
    if run.watch is None:  # the monitor keeps only these: the members and their devices' agents
        run.watch = run.monitor.wait_dead.remote([*run.names.values(),
                                                  *(name for _, name, _ in run.servers)],
                                                 [*run.workers, *(d for d, _, _ in run.servers)],
                                                 WATCH_PERIODS * heartbeat_s)
    return run.watch


def await_all(run: Attempt, futures: dict[str, Any], heartbeat_s: float,
              events: Any) -> dict[str, Any]:
    """Results of ``futures`` (by worker device); raise Interrupted as soon as an actor dies
    or a member of the run misses heartbeats. The monitor answers a long poll the moment a
    member is dead; progress is read from the server every quarter period meanwhile."""
    pending = {ref: device for device, ref in futures.items()}
    results: dict[str, Any] = {}
    while pending:
        watch = _watch(run, heartbeat_s)
        asked = progress_poll_s(events)
        poll_s = heartbeat_s / 4 if asked is None else min(heartbeat_s / 4, asked)
        done, _ = ray.wait([*pending, watch], num_returns=1, timeout=poll_s)
        if done and done[0] == watch:
            run.watch = None
            lost = _lost(run, ray.get(watch))
            if lost:
                run.outstanding.extend(pending)
                raise Interrupted(with_the_dead(run, lost), time.time())
            continue
        for ref in done:
            device = pending.pop(ref)
            try:
                results[device] = ray.get(ref)
            except RayError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, ConfigError):
                    raise cause from None  # bad input is no fault: restarting cannot help
                member = run.names.get(device, device)
                reason = type(exc).__name__ + ": " + str(exc).splitlines()[0][:200]
                if isinstance(cause, MemoryError):  # the worker's own check names its device
                    reason = f"out of memory: {str(cause)[:200]}"
                # a worker fails too when a server it pushes to is gone: blame the server
                for index, shard in enumerate(run.shards):
                    ps_get(run, shard.progress.remote(), timeout_s=PS_PROBE_S, server=index)
                reason = run.lost_reason(device, reason)
                run.outstanding.extend(pending)
                raise Interrupted(with_the_dead(run, [(device, member, reason)]),
                                  time.time()) from None
        if not done:
            events("progress", {"samples": ps_get(run, run.ps.progress.remote())[1]})
        else:
            events("tick", {})
    return results

