"""A pipeline job serving: the dispatcher streams the job's own requests and those that
arrive over HTTP, in order, measures latency and throughput, and switches model versions
between batches (the dispatcher drains the old stages first: nothing is dropped)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgewise.errors import EdgewiseError
from edgewise.jobs import JobContext
from edgewise.pipeline.dispatcher import Dispatcher, Result

__all__ = ["Meter", "NotServing", "OwnStream", "PipelineBusy", "PipelineServer", "serve"]


class PipelineBusy(EdgewiseError):
    """The pipeline cannot take the request: not serving any more, or too many waiting."""


@dataclass
class _Waiting:
    inputs: np.ndarray[Any, Any]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[Result] = field(default_factory=list)
    error: str | None = None


class PipelineServer:
    """What a running pipeline job publishes: a bounded queue of inference requests and the
    model switches asked for. Thread-safe."""

    def __init__(self, max_waiting_inputs: int = 1024) -> None:
        self._lock = threading.Condition()
        self._queue: deque[_Waiting] = deque()
        self._waiting_inputs, self._max = 0, max_waiting_inputs
        self._switch: int | None = None
        self._closed: str | None = None

    def infer(self, inputs: np.ndarray[Any, Any], timeout_s: float) -> list[Result]:
        """Queue ``inputs`` (one request each) and wait for their results, in order."""
        item = _Waiting(inputs)
        with self._lock:
            if self._closed is not None:
                raise PipelineBusy(f"the pipeline no longer serves: {self._closed}")
            if self._waiting_inputs + len(inputs) > self._max:
                raise PipelineBusy(f"more than {self._max} inputs are waiting; try again")
            self._queue.append(item)
            self._waiting_inputs += len(inputs)
            self._lock.notify_all()
        if not item.done.wait(timeout_s):
            raise PipelineBusy(f"no answer within {timeout_s:g} s")
        if item.error is not None:
            raise PipelineBusy(item.error)
        return item.results

    def switch(self, seed: int) -> None:
        """Ask for the model version with weights from ``seed`` (at the next batch)."""
        with self._lock:
            if self._closed is not None:
                raise PipelineBusy(f"the pipeline no longer serves: {self._closed}")
            self._switch = seed
            self._lock.notify_all()

    def take(self, limit: int) -> list[_Waiting]:
        """Waiting requests, oldest first, up to ``limit`` inputs (at least one request)."""
        out: list[_Waiting] = []
        with self._lock:
            while self._queue and (not out or sum(len(w.inputs) for w in out) +
                                   len(self._queue[0].inputs) <= limit):
                item = self._queue.popleft()
                self._waiting_inputs -= len(item.inputs)
                out.append(item)
        return out

    def pop_switch(self) -> int | None:
        with self._lock:
            seed, self._switch = self._switch, None
            return seed

    def idle(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a request or a switch."""
        with self._lock:
            if not self._queue and self._switch is None:
                self._lock.wait(seconds)

    def close(self, reason: str) -> None:
        """Refuse new requests and fail those still waiting with ``reason``."""
        with self._lock:
            self._closed = reason
            waiting, self._queue = list(self._queue), deque()
        for item in waiting:
            item.error = reason
            item.done.set()


@dataclass(frozen=True, slots=True)
class NotServing:
    """What a pipeline job that takes no HTTP requests publishes: why (its routes answer 409
    with ``reason``)."""

    reason: str


@dataclass
class Meter:
    """Throughput and latency of each batch through the pipeline, as job metrics."""

    ctx: JobContext
    started: float = field(default_factory=time.monotonic)
    total: int = 0

    def add(self, results: list[Result], seconds: float) -> None:
        for r in results:
            self.ctx.metric("request_latency_s", r.latency_s)
        self.total += len(results)
        if not results:
            return
        step = round(time.monotonic() - self.started, 3)
        if seconds > 0:
            self.ctx.metric("throughput_rps", len(results) / seconds, step=step)
        p50, p99 = np.percentile([r.latency_s for r in results], [50, 99])
        self.ctx.metric("latency_p50_s", float(p50), step=step)
        self.ctx.metric("latency_p99_s", float(p99), step=step)


@dataclass(frozen=True)
class OwnStream:
    """The job's own requests: ``count`` inputs, then ``serve_seconds`` of HTTP serving; a
    switch to the weights of ``switch_seed`` after ``switch_after`` of them."""

    inputs: Iterator[np.ndarray[Any, Any]]
    count: int
    serve_seconds: float
    switch_after: int | None
    switch_seed: int


def serve(dispatcher: Dispatcher, cuts: tuple[int, ...], server: PipelineServer,
          own: OwnStream, ctx: JobContext, new_model: Callable[[int], Any]) -> dict[str, Any]:
    """Stream the job's own inputs and the HTTP requests until both are done and
    ``serve_seconds`` have passed since; returns the job's figures."""
    meter, sent, restarts, n_own = Meter(ctx), 0, 0, own.count
    quiet_since: float | None = None
    while True:
        ctx.check_stop()
        seed = server.pop_switch()
        if seed is None and own.switch_after is not None and sent >= own.switch_after \
                and dispatcher.version == 0:
            seed = own.switch_seed
        if seed is not None:
            dispatcher.switch_model(new_model(seed), cuts)
            ctx.event("model-switch", f"switched to model version {dispatcher.version} "
                      f"after {meter.total} results; nothing dropped", version=dispatcher.version)
        batch = server.take(dispatcher.window * 2)
        began = time.monotonic()
        if batch:
            outs = list(dispatcher.run([x for w in batch for x in w.inputs]))
            at = 0
            for w in batch:
                w.results, at = outs[at:at + len(w.inputs)], at + len(w.inputs)
                w.done.set()
        elif sent < n_own:
            chunk = [next(own.inputs) for _ in range(min(dispatcher.window * 2, n_own - sent))]
            outs = list(dispatcher.run(chunk))
            sent += len(chunk)
        else:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= own.serve_seconds:
                break
            server.idle(0.2)
            continue
        meter.add(outs, time.monotonic() - began)
        if dispatcher.restarts > restarts:
            ctx.event("restart", f"stage restarts: {dispatcher.restarts}; pending requests "
                      f"re-sent ({dispatcher.resends} so far)", restarts=dispatcher.restarts)
            restarts = dispatcher.restarts
        fraction = sent / n_own if n_own else 1.0
        ctx.progress(min(fraction, 0.99), results=meter.total, version=dispatcher.version,
                     restarts=dispatcher.restarts)
    elapsed = time.monotonic() - meter.started
    return {"results": meter.total, "throughput_rps": meter.total / elapsed if elapsed else 0.0,
            "restarts": dispatcher.restarts, "resends": dispatcher.resends,
            "duplicates": dispatcher.duplicates, "version": dispatcher.version}
