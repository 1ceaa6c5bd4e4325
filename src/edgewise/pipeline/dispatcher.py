"""The pipeline's dispatcher (SEIFER §4.3–4.4): feeds a chain of stage actors, collects
results in request order, restarts failed stages and re-sends by request id, switches
models without dropping a request."""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayError
from torch import nn

from edgewise.cluster.model import Role
from edgewise.errors import ConfigError, RuntimeFault
from edgewise.nn.slices import SliceWeights, state_bytes
from edgewise.nn.split import split_sequential
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.stages import DispatchEndpoint, StageActor
from edgewise.runtime.vessel_pool import release_members, spawn_member
from edgewise.wire.activation import ActivationCodec, decode_activation, encode_activation
from edgewise.wire.state import stage_payload

__all__ = ["DEFAULT_WINDOW", "Dispatcher", "Payloads", "Result", "Splitter"]

Splitter = Callable[[nn.Module, tuple[int, ...]], list[nn.Module]]
Payloads = Callable[[tuple[int, ...]], list[tuple[nn.Module, SliceWeights]]]
_ENDPOINT_MEMORY_MB = 64
DEFAULT_WINDOW = 8
"""Requests accepted but not yet yielded, unless the caller sizes the window."""


@dataclass(frozen=True, slots=True)
class Result:
    """One request's output; ``version`` counts model switches; latency from first send."""

    request_id: int
    output: np.ndarray[Any, Any]
    version: int
    latency_s: float


@dataclass(slots=True)
class _Pending:
    frame: bytes
    raw_bytes: int
    version: int
    first_sent: float
    last_sent: float


@dataclass(slots=True)
class _Stage:
    name: str
    device: str
    handle: Any
    skeleton: nn.Module = field(repr=False)
    weights: bytes | SliceWeights = field(repr=False)
    memory_mb: int
    codec: ActivationCodec


class Dispatcher:
    """Feeds a pipeline of stage actors and yields results in request order.

    Delivery is at-least-once into the pipeline and exactly-once out of it: every accepted
    request stays pending until its result comes back; when a stage dies (``RayActorError``)
    or does not answer a ping within ``ping_timeout_s``, it is restarted, its neighbours are
    re-wired and every pending request is re-sent from the first stage by its id; a request
    pending longer than ``request_timeout_s`` with all stages healthy is re-sent too. A second
    result for an id already answered is dropped (counted in ``duplicates``).

    Parameters
    ----------
    runtime : RayRuntime
        The Ray instance hosting the cluster.
    model : nn.Module or None
        The model; ``splitter(model, cuts)`` gives its partitions. None with ``payloads``.
    devices : sequence of str
        The device of each partition, in pipeline order (distinct).
    cuts : sequence of int
        Partition boundaries (see :func:`~edgewise.nn.split.split_sequential`).
    dispatcher_device : str or None
        Where the dispatcher's endpoint runs; default the first manager device not in
        ``devices``, else the first such device.
    codec : ActivationCodec
        Compression of requests and activations (LZ4; ZFP with an absolute error bound).
    window : int
        Most requests accepted but not yet yielded.
    restart : {"same", "other"}
        Restart a failed stage on its device, or on the first free device that fits.
    health_s, ping_timeout_s, request_timeout_s : float
        Health check period while requests are pending, ping deadline, resend deadline.
    splitter : Callable
        ``(model, cuts) -> list[nn.Module]``; ``split_sequential`` by default.
    max_restarts : int
        More stage restarts than this raise :class:`~edgewise.errors.RuntimeFault`.
    payloads : Callable or None
        ``cuts -> [(skeleton, SliceWeights)]``: each stage's structure (tensors on ``meta``)
        and where it reads its own weights, so that neither the dispatcher nor any stage
        holds the whole model (:mod:`edgewise.nn.slices`); replaces ``model`` and
        ``splitter``.
    """

    def __init__(self, runtime: RayRuntime, model: nn.Module | None, devices: Iterable[str],
                 cuts: Iterable[int], *, dispatcher_device: str | None = None,
                 codec: ActivationCodec | None = None, window: int = DEFAULT_WINDOW,
                 restart: Literal["same", "other"] = "same", health_s: float = 0.5,
                 ping_timeout_s: float = 5.0, request_timeout_s: float = 30.0,
                 splitter: Splitter = split_sequential, max_restarts: int = 10,
                 startup_timeout_s: float = 300.0, payloads: Payloads | None = None) -> None:
        if window < 1 or restart not in ("same", "other"):
            raise ConfigError("window must be >= 1 and restart 'same' or 'other'",
                              field="window")
        self.runtime, self.codec = runtime, codec or ActivationCodec()
        self.window, self.restart, self.splitter = window, restart, splitter
        self.payloads = payloads
        self.health_s, self.ping_timeout_s = health_s, ping_timeout_s
        self.request_timeout_s, self.max_restarts = request_timeout_s, max_restarts
        self.startup_timeout_s = startup_timeout_s
        devices = tuple(devices)
        self.device = dispatcher_device or _pick_dispatcher(runtime, devices)
        self.endpoint = spawn_member(DispatchEndpoint, runtime.member_options(
            self.device, _ENDPOINT_MEMORY_MB, f"dispatch-{uuid.uuid4().hex[:8]}"))
        self.version, self.restarts, self.resends, self.duplicates = 0, 0, 0, 0
        self._next_id = self._next_yield = 0
        self._pending: dict[int, _Pending] = {}
        self._done: dict[int, Result] = {}
        self._last_health = time.monotonic()
        self._retired_counts: list[dict[str, int]] = []
        self.stages = self._deploy(model, tuple(cuts), devices, self.codec)
        ray.get(self._connect(self.stages, -1), timeout=self.startup_timeout_s)

    @property
    def admitted(self) -> int:
        """Requests accepted so far; ids ``0 .. admitted - 1``."""
        return self._next_id

    @property
    def stage_names(self) -> list[str]:
        """Names of the live stage actors, in pipeline order (for fault injection)."""
        return [s.name for s in self.stages]

    def run(self, inputs: Iterable[np.ndarray[Any, Any]]) -> Iterator[Result]:
        """Send ``inputs`` (numpy, in the model's dtype) through the pipeline; yield results in
        request-id order, exactly one per input. Inputs are drawn lazily, ``window`` ahead."""
        source, exhausted = iter(inputs), False
        while True:
            while not exhausted and self._next_id - self._next_yield < self.window:
                try:
                    self._submit(np.asarray(next(source)))
                except StopIteration:
                    exhausted = True
            while self._next_yield in self._done:
                result = self._done.pop(self._next_yield)
                self._next_yield += 1
                yield result
            if exhausted and self._next_yield == self._next_id:
                return
            self._pump()

    def switch_model(self, model: nn.Module | None, cuts: Iterable[int],
                     devices: Iterable[str] | None = None,
                     codec: ActivationCodec | None = None,
                     splitter: Splitter | None = None) -> None:
        """Model watch (SEIFER §4.3.2 (3)): deploy the new model's stages alongside the old
        (on ``devices``, default the current ones; with ``codec``, default the current one;
        cut by ``splitter``, default the current one: a traced model's splitter cuts its own
        graph), drain every pending request through the old pipeline, then send new
        requests to the new one and retire the old stages. Nothing is dropped; ``version``
        increases."""
        devices = tuple(devices) if devices is not None else tuple(s.device for s in self.stages)
        fresh = self._deploy(model, tuple(cuts), devices, codec or self.codec,
                             splitter or self.splitter)
        while self._pending:
            self._pump()
        self.splitter = splitter or self.splitter
        old, self.stages = self.stages, fresh
        self.version, self.codec = self.version + 1, codec or self.codec
        ray.get(self._connect(self.stages, -1), timeout=self.startup_timeout_s)
        self._retire(old)

    def byte_counts(self) -> dict[str, int]:
        """Frames and bytes sent by the endpoint and every stage (retired ones included;
        a killed stage's own counts die with it)."""
        total: dict[str, int] = {}
        for counts in [*self.hop_counts(), *self._retired_counts]:
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
        return total

    def hop_counts(self) -> list[dict[str, int]]:
        """What each live hop has sent, in pipeline order: the endpoint (into the first
        stage), then each stage (the last back to the endpoint), from its (re)start."""
        return ray.get([self.endpoint.counts.remote()] +
                       [s.handle.counts.remote() for s in self.stages])

    def stage_timings(self) -> list[dict[str, float]]:
        """Each live stage's frames processed and wall seconds computing, in pipeline order
        (a restarted stage counts from its restart)."""
        return [dict(t) for t in ray.get([s.handle.timing.remote() for s in self.stages])]

    def close(self) -> None:
        """Kill the stages and the endpoint."""
        release_members([*(s.handle for s in self.stages), self.endpoint])
        self.stages = []

    def _parts(self, model: nn.Module | None, cuts: tuple[int, ...], splitter: Splitter
               ) -> list[tuple[nn.Module, bytes | SliceWeights]]:
        """Each stage's structure (on ``meta``) and its weights, or where to read them."""
        if self.payloads is not None:
            return list(self.payloads(cuts))
        if model is None:
            raise ConfigError("a pipeline needs a model or stage payloads", field="model")
        return [stage_payload(part) for part in splitter(model, cuts)]

    def _deploy(self, model: nn.Module | None, cuts: tuple[int, ...], devices: tuple[str, ...],
                codec: ActivationCodec, splitter: Splitter | None = None) -> list[_Stage]:
        """Start one actor per partition, chain them, the last to the endpoint; wait ready."""
        parts = self._parts(model, cuts, splitter or self.splitter)
        if len(parts) != len(devices) or len(set(devices)) != len(devices):
            raise ConfigError(f"{len(parts)} partitions need as many distinct devices, got "
                              f"{list(devices)}", field="devices")
        tag = uuid.uuid4().hex[:6]
        stages = []
        for k, ((skeleton, weights), device) in enumerate(zip(parts, devices, strict=True)):
            memory_mb = 64 + (math.ceil(4 * len(weights) / 2**20) if isinstance(weights, bytes)
                              else math.ceil(state_bytes(skeleton) / 2**20))
            stage = _Stage(f"stage-{tag}-{k}", device, None, skeleton, weights, memory_mb, codec)
            stage.handle = self._start(stage, device)
            stages.append(stage)
        ray.get([self._connect(stages, k) for k in range(len(stages))],
                timeout=self.startup_timeout_s)
        return stages

    def _connect(self, stages: list[_Stage], k: int) -> Any:
        """Point stage ``k`` (-1: the endpoint) at the next hop over their link; the ref."""
        src, device = (self.endpoint, self.device) if k < 0 else (stages[k].handle,
                                                                   stages[k].device)
        nxt = stages[k + 1] if k + 1 < len(stages) else None
        hop, peer = (nxt.handle, nxt.device) if nxt else (self.endpoint, self.device)
        return src.connect.remote(hop, self.runtime.transport_link(device, peer))

    def _start(self, stage: _Stage, device: str) -> Any:
        options = self.runtime.member_options(device, stage.memory_mb, stage.name)
        return spawn_member(StageActor, options, stage.name, device, stage.skeleton,
                            stage.weights, self.runtime.stretch.get(device, 1.0), stage.codec)

    def _submit(self, x: np.ndarray[Any, Any]) -> None:
        rid, now = self._next_id, time.monotonic()
        self._next_id += 1
        frame = encode_activation(x, {"id": rid, "v": self.version}, self.codec)
        self._pending[rid] = _Pending(frame, x.nbytes, self.version, now, now)
        self.endpoint.inject.remote(frame, x.nbytes)

    def _pump(self) -> None:
        """Collect results for a moment; check the stages' health when it is due."""
        for frame in ray.get(self.endpoint.collect.remote(0.05)):
            y, meta = decode_activation(frame)
            pending = self._pending.pop(int(meta["id"]), None)
            if pending is None:
                self.duplicates += 1
                continue
            self._done[int(meta["id"])] = Result(int(meta["id"]), y.numpy(), pending.version,
                                                 time.monotonic() - pending.first_sent)
        if self._pending and time.monotonic() - self._last_health >= self.health_s:
            self._check_health()

    def _check_health(self) -> None:
        """Restart dead or silent stages and re-send what is pending; re-send overdue ones."""
        failed = _unhealthy([s.handle for s in self.stages], self.ping_timeout_s)
        for k in failed:
            self._restart(k)
        now = time.monotonic()
        for _, p in sorted(self._pending.items()):
            if failed or now - p.last_sent > self.request_timeout_s:
                p.last_sent = now
                self.resends += 1
                self.endpoint.inject.remote(p.frame, p.raw_bytes)
        self._last_health = time.monotonic()

    def _restart(self, k: int) -> None:
        """Replace stage ``k`` (SEIFER §4.4 (3)–(4)) and re-wire its neighbours."""
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RuntimeFault(f"more than {self.max_restarts} stage restarts; giving up")
        old = self.stages[k]
        release_members([old.handle], kill=True)
        device = self._restart_device(old)
        stage = _Stage(f"{old.name}-r{self.restarts}", device, None, old.skeleton, old.weights,
                       old.memory_mb, old.codec)
        stage.handle = self._start(stage, device)
        self.stages[k] = stage
        ray.get([self._connect(self.stages, k), self._connect(self.stages, k - 1)],
                timeout=self.startup_timeout_s)

    def _restart_device(self, old: _Stage) -> str:
        """Where a failed stage starts again: its device, or (``restart="other"``, or when
        its device is gone: a plan on a dead device would wait forever) the first free
        device that fits and is not lost; with none free, the live device with the most
        memory, beside what it runs already."""
        lost = self.runtime.lost_devices()
        if self.restart == "same" and old.device not in lost:
            return old.device
        busy = {s.device for s in self.stages} | {self.device} | lost
        for d in self.runtime.cluster.devices:
            if d.name not in busy and d.memory_mb >= old.memory_mb:
                return d.name
        alive = [d for d in self.runtime.cluster.devices if d.name not in lost]
        if old.device not in lost or not alive:
            return old.device
        return max(alive, key=lambda d: d.memory_mb).name

    def _retire(self, stages: list[_Stage]) -> None:
        for s in stages:
            with contextlib.suppress(RayError, GetTimeoutError):
                self._retired_counts.append(ray.get(s.handle.counts.remote(), timeout=5.0))
        release_members([s.handle for s in stages])


def _pick_dispatcher(runtime: RayRuntime, devices: tuple[str, ...]) -> str:
    free = [d for d in runtime.cluster.devices if d.name not in devices]
    managers = [d for d in free if d.has_role(Role.MANAGER)]
    if not (managers or free):
        raise ConfigError("no device left for the dispatcher", field="dispatcher_device")
    return (managers or free)[0].name


def _unhealthy(handles: list[Any], timeout_s: float) -> list[int]:
    """Indices of the actors that are dead or do not answer a ping within ``timeout_s``."""
    refs = [h.ping.remote() for h in handles]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    failed = []
    for k, ref in enumerate(refs):
        try:
            if ref not in ready:
                raise GetTimeoutError
            ray.get(ref)
        except (RayError, GetTimeoutError):
            failed.append(k)
    return failed
