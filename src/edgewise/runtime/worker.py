"""The worker actor: trains its shard of any workload batch by batch, pushing gradients to the
parameter server and pulling weights back after every batch (Deep-Edge §III)."""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import psutil
import ray
import torch

from edgewise.cluster.model import Link
from edgewise.nn.workload import Workload, build_network, builtin_workload, loss
from edgewise.runtime.balance import epoch_batches
from edgewise.runtime.datastore import chunks, read_frames
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.evaluate import calibration_samples, statistics_frame, validation_metric
from edgewise.runtime.heartbeat import Heartbeat
from edgewise.runtime.idle import idle_executor
from edgewise.runtime.psclient import Servers
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.syncdelta import check_delta
from edgewise.runtime.trainstate import FlatState, Frame, frame_view
from edgewise.runtime.transport import carry
from edgewise.wire.frames import WireDtype, decode

__all__ = ["Worker"]

_RSS_CHECK_EVERY = 20
Validation = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]  # x, y, calibration x


def _name_seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


@ray.remote(max_concurrency=3)  # type: ignore[call-overload]
class Worker:
    """One data-parallel worker pinned to an (emulated) device. ``model`` is a workload (or a
    built-in model name, trained on digits); the worker builds its network without weights,
    since it pulls them from the parameter server before its first batch. ``ps`` is the
    server, or its shards in order (``runtime.shards``), with a link to each."""

    def __init__(self, name: str, device: str, model: str | Workload, seed: int, batch_size: int,
                 stretch: float, memory_cap_mb: int, ps: Any, ps_link: Link | list[Link],
                 store_link: Link, monitor: Any, heartbeat_s: float, sync: bool,
                 compression: str = "lz4", steps: int = 0, transport: str = "socket",
                 overlap: bool = False, wire_dtype: WireDtype = "float32") -> None:
        torch.set_num_threads(1)
        self.name, self.device, self.seed, self.batch = name, device, seed, batch_size
        self.stretch, self.memory_cap_mb, self.sync = stretch, memory_cap_mb, sync
        # computes the next batch while the server answers this one (MemberSpec.of sets it
        # for the ``async`` loop alone)
        self.overlap = overlap
        self.compression = compression
        # "socket": runtime.psplane; "ray": an actor call a batch
        self.servers = Servers(ps if isinstance(ps, list) else [ps],
                               ps_link if isinstance(ps_link, list) else [ps_link],
                               device, name, transport, sync)
        self.steps = steps  # > 0: this many batches an epoch, the shard split evenly
        self.version = 0  # the server version of the weights this worker holds
        self.workload = builtin_workload(model) if isinstance(model, str) else model
        task = self.workload.task
        self.model = build_network(self.workload, seed=seed, num_classes=task.num_classes,
                                   input_shape=task.input_shape).train()
        self.flat = FlatState(self.model, wire_dtype)
        self.store_link = ShapedLink(store_link)
        self.counter = ByteCounter()  # both directions
        self.received = ByteCounter()  # the server's replies and pulls alone
        self.process = psutil.Process(os.getpid())
        self.hb = Heartbeat(monitor, name, "worker", device, heartbeat_s)
        self.x = torch.zeros(0)
        self.y = torch.zeros(0, dtype=torch.int64)
        self.ids = np.zeros(0, np.int64)
        self.val: Validation | None = None
        self.evaluation: FlatState | None = None  # the evaluation's network, beside this one
        self.beside: ThreadPoolExecutor | None = None  # its thread (set_evaluation)

    def load_shard(self, store: Any, positions: np.ndarray,
                   chunk_samples: int | None = None) -> int:
        """Fetch this worker's shard from the data store, ``chunk_samples`` samples per
        request (all at once if None), and decode it; returns the bytes received."""
        frames: list[bytes] = []
        for part in chunks(np.asarray(positions, np.int64), chunk_samples or len(positions)):
            frame: bytes = ray.get(store.shard.remote(self.name, part))
            raw = sum(a.nbytes for a in decode(frame).arrays.values())
            carry(self.store_link, len(frame), self.counter, raw_bytes=raw)
            frames.append(frame)
        data = read_frames(frames, self.workload)
        self.x, self.y = torch.from_numpy(data.x), torch.from_numpy(data.y)
        self.ids = data.ids
        return sum(len(f) for f in frames)

    def _load_weights(self, frames: list[Frame]) -> None:
        """Load every server's reply (a shard's: its range), then hold their version."""
        meta: dict[str, Any] = {}
        for frame, link in zip(frames, self.servers.links, strict=True):
            decoded = decode(frame_view(frame))
            raw = sum(a.nbytes for a in decoded.arrays.values())
            carry(link, len(frame), self.counter, raw_bytes=raw)
            self.received.record(link.key, raw_bytes=raw, wire_bytes=len(frame))
            self.flat.load_weights(decoded, change=check_delta(decoded.meta, self.version))
            meta = decoded.meta
        self.version = int(meta.get("updates", 0))

    def _gradients(self, index: np.ndarray) -> None:
        with emulated_compute(self.stretch):
            self.flat.zero_grad()
            value = loss(self.workload.task, self.model(self.x[index]), self.y[index])
            value.backward()  # type: ignore[no-untyped-call]
            self.flat.check_grads()

    def _push(self, step: int, index: np.ndarray) -> Any:
        """Send this batch's gradients, buffers and sample ids (to each shard its range);
        the Ray calls' refs (None over the data plane, whose replies ``servers`` reads)."""
        ids = self.ids[index]
        frames = self.flat.gradients_frames(ids, self.compression,  # type: ignore[arg-type]
                                            base=self.version, shards=self.servers.count)
        raw, wire = self.flat.nbytes + ids.nbytes, sum(len(f) for f in frames)
        for frame, link in zip(frames, self.servers.links, strict=True):
            carry(link, len(frame), self.counter, raw_bytes=raw * len(frame) // max(wire, 1))
        # Ray passes arrays without a bytes copy
        return self.servers.push(step, [np.frombuffer(f, np.uint8) for f in frames])

    def _check_memory(self) -> None:
        rss_mb = self.process.memory_info().rss / 2**20
        if rss_mb > self.memory_cap_mb:
            cap = self.memory_cap_mb
            raise MemoryError(f"{self.device}: {rss_mb:.0f} MB exceeds its {cap} MB")

    def run_epoch(self, epoch: int) -> dict[str, float]:
        """Train every sample of the shard once; returns the epoch's timings: compute per
        sample, and per batch the whole update and its parts (encoding the push, waiting
        for the server's reply, loading the weights it returned). With ``overlap`` a batch's
        push goes out before the previous push's weights are loaded, so the server works
        on it while the worker computes the next batch (one version staler)."""
        # seeded by the device, not the member's name (which carries the job's id and
        # attempt): a job run again with the same seed trains on the same batches
        rng = np.random.default_rng([self.seed, epoch, _name_seed(self.device)])
        order = rng.permutation(len(self.ids))
        # and the masks of its dropout: the process's generator is seeded the same way (a
        # vessel's process outlives runs, so its generator's state is another run's)
        torch.manual_seed(int(rng.integers(1 << 62)))
        wall0 = time.perf_counter()
        spent = dict.fromkeys(("compute", "update", "encode", "wait", "load"), 0.0)
        self._load_weights(self.servers.pull())
        batches = epoch_batches(order, self.batch, self.steps)
        pending, reply = False, None  # overlap: the last push, its reply not yet read
        for step, index in enumerate(batches):
            self._obey()
            t0 = time.perf_counter()
            self._gradients(index)
            t1 = time.perf_counter()
            frame = self.servers.replies(reply) if pending else None
            t2 = time.perf_counter()
            reply = self._push(step, index)  # based on the weights the gradients used
            t3 = time.perf_counter()
            pending = self.overlap
            if not pending:
                frame = self.servers.replies(reply)
            t4 = time.perf_counter()
            if frame is not None:
                self._load_weights(frame)
            t5 = time.perf_counter()
            for key, seconds in (("compute", t1 - t0), ("update", t5 - t1), ("encode", t3 - t2),
                                 ("wait", t2 - t1 + t4 - t3), ("load", t5 - t4)):
                spent[key] += seconds
            if step % _RSS_CHECK_EVERY == 0:
                self._check_memory()
        if pending:
            self._load_weights(self.servers.replies(reply))
        self.servers.leave()  # sync steps and SSP stop waiting for it
        n, count = len(order), max(len(batches), 1)
        return {"samples": float(n), "steps": float(len(batches)),
                "wall_seconds": time.perf_counter() - wall0,
                "compute_seconds_per_sample": spent["compute"] / max(n, 1),
                **{f"{k}_seconds_per_batch": v / count for k, v in spent.items()
                   if k != "compute"}}

    def set_evaluation(self, validation: list[bytes], calibration: list[bytes],
                       beside: bool = False, idle: bool = True) -> int:
        """Make this worker the run's evaluator: decode the validation set and the
        calibration batches (BatchNorm's re-estimation), and with ``beside`` build the
        evaluation's own network, read on a thread at idle priority where ``idle`` (a device
        of its own, ``runtime.idle.idle_executor``); returns the validation samples."""
        val = read_frames(validation, self.workload)
        self.val = (torch.from_numpy(val.x), torch.from_numpy(val.y),
                    calibration_samples(calibration, self.workload))
        if beside and self.beside is None:  # built now: building seeds the generator
            self._evaluation_state()
            self.beside = idle_executor(f"evaluate-{self.device}", lowered=idle)
        return len(val.y)

    def evaluate(self, weights: list[Any] | None = None) -> dict[str, Any]:
        """The validation metric of the server's weights, measured here at this device's
        speed (``runtime.evaluate``), the seconds it took with the transfer, and the
        BatchNorm statistics it was measured with (for the epoch's checkpoint). Without
        ``weights``: the server's current weights, read into this worker's own model (its
        next epoch pulls them anew). With ``weights``, the ObjectRefs of the server's weights
        frame, or of each shard's (in a list, so that this call fetches them and times the
        transfer): those weights, read into
        a model of the evaluation's own, so that this worker's next epoch can train
        meanwhile (``TrainConfig.evaluation`` ``beside``)."""
        if self.val is None:
            raise RuntimeError(f"{self.name} is not the run's evaluator")
        if weights is None:
            return self._evaluate(self.servers.weights(), self.flat, self.val)
        if self.beside is None:
            raise RuntimeError(f"{self.name} was not made to read beside (set_evaluation)")
        return self.beside.submit(self._evaluate, weights, self._evaluation_state(),
                                  self.val).result()

    def _evaluate(self, refs: list[Any], flat: FlatState, val: Validation) -> dict[str, Any]:
        t0 = time.perf_counter()
        for ref, link in zip(refs, self.servers.links, strict=True):
            frame = ray.get(ref)
            decoded = decode(frame_view(frame))
            carry(link, len(frame), self.counter,
                  raw_bytes=sum(a.nbytes for a in decoded.arrays.values()))
            flat.load_weights(decoded)
        with emulated_compute(self.stretch):
            metric = validation_metric(flat.model, self.workload.task, *val)
        return {"val_accuracy": metric, "validation_seconds": time.perf_counter() - t0,
                "statistics": statistics_frame(flat.model)}

    def _evaluation_state(self) -> FlatState:
        """The evaluation's own network, beside the one this worker trains (built when the
        worker becomes the evaluator: building a network seeds the process's generator,
        which the training's dropout draws from, so not while an epoch trains)."""
        if self.evaluation is None:
            task = self.workload.task
            model = build_network(self.workload, seed=self.seed, num_classes=task.num_classes,
                                  input_shape=task.input_shape)
            self.evaluation = FlatState(model)
        return self.evaluation

    def _obey(self) -> None:
        """Freeze while the device is stalled; cut or restore the link to the server."""
        self.servers.obey(self.hb.obey())

    def bytes_sent(self) -> dict[str, int]:
        """Raw and on-the-wire bytes this worker sent and received, in total, and the wire
        bytes of the weights it received from the server (``wire_bytes_received``)."""
        total = self.counter.snapshot().total
        return {"frames": total.frames, "raw_bytes": total.raw_bytes,
                "wire_bytes": total.wire_bytes,
                "wire_bytes_received": self.received.snapshot().total.wire_bytes}

    def stop(self) -> None:
        self.hb.stop()
        if self.beside is not None:
            self.beside.shutdown(wait=False)
        self.servers.close()
