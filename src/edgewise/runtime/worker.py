"""The worker actor: trains its shard batch by batch, pushing gradients to the parameter
server and pulling weights back after every batch (Deep-Edge §III)."""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import numpy as np
import psutil
import ray
import torch
import torch.nn.functional as F

from edgewise.cluster.model import Link
from edgewise.nn.models import build_model
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.heartbeat import Heartbeat
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import send
from edgewise.wire.frames import decode, to_torch

__all__ = ["Worker"]

_RSS_CHECK_EVERY = 20


def _name_seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


@ray.remote(max_concurrency=2)  # type: ignore[call-overload]
class Worker:
    """One data-parallel worker pinned to an (emulated) device."""

    def __init__(self, name: str, device: str, model: str, seed: int, batch_size: int,
                 stretch: float, memory_cap_mb: int, ps: Any, ps_link: Link,
                 store_link: Link, monitor: Any, heartbeat_s: float, sync: bool,
                 compression: str = "lz4") -> None:
        torch.set_num_threads(1)
        self.name, self.device, self.seed, self.batch = name, device, seed, batch_size
        self.stretch, self.memory_cap_mb, self.sync = stretch, memory_cap_mb, sync
        self.ps, self.compression = ps, compression
        self.model = build_model(model, seed)
        self.ps_link, self.store_link = ShapedLink(ps_link), ShapedLink(store_link)
        self.ps_peer = ps_link.b if ps_link.a == device else ps_link.a
        self.counter = ByteCounter()
        self.process = psutil.Process(os.getpid())
        self.hb = Heartbeat(monitor, name, "worker", device, heartbeat_s)
        self.x = torch.zeros(0)
        self.y = torch.zeros(0, dtype=torch.int64)
        self.ids = np.zeros(0, np.int64)

    def load_shard(self, store: Any, positions: np.ndarray) -> int:
        """Fetch this worker's shard from the data store; returns the frame's size."""
        frame: bytes = ray.get(store.shard.remote(self.name, positions))
        self.store_link.transmit(len(frame))
        arrays = decode(frame).arrays
        raw = sum(a.nbytes for a in arrays.values())
        self.counter.record(self.store_link.key, raw_bytes=raw, wire_bytes=len(frame))
        self.x, self.y = torch.from_numpy(arrays["x"].copy()), torch.from_numpy(arrays["y"].copy())
        self.ids = arrays["ids"].copy()
        return len(frame)

    def _load_weights(self, frame: bytes) -> None:
        self.ps_link.transmit(len(frame))
        decoded = decode(frame)
        raw = sum(a.nbytes for a in decoded.arrays.values())
        self.counter.record(self.ps_link.key, raw_bytes=raw, wire_bytes=len(frame))
        weights = to_torch(decoded)
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                p.copy_(weights[name])

    def _gradients(self, index: np.ndarray) -> dict[str, torch.Tensor]:
        with emulated_compute(self.stretch):
            self.model.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(self.x[index]), self.y[index])
            loss.backward()  # type: ignore[no-untyped-call]
        grads = {n: p.grad.detach() for n, p in self.model.named_parameters() if p.grad is not None}
        grads["ids"] = torch.from_numpy(self.ids[index])
        return grads

    def _check_memory(self) -> None:
        rss_mb = self.process.memory_info().rss / 2**20
        if rss_mb > self.memory_cap_mb:
            cap = self.memory_cap_mb
            raise MemoryError(f"{self.device}: {rss_mb:.0f} MB exceeds its {cap} MB")

    def run_epoch(self, epoch: int) -> dict[str, float]:
        """Train every sample of the shard once; returns the epoch's timings."""
        rng = np.random.default_rng([self.seed, epoch, _name_seed(self.name)])
        order = rng.permutation(len(self.ids))
        wall0, compute_s, update_s = time.perf_counter(), 0.0, 0.0
        self._load_weights(ray.get(self.ps.pull.remote()))
        for step, start in enumerate(range(0, len(order), self.batch)):
            self._obey()
            t0 = time.perf_counter()
            grads = self._gradients(order[start : start + self.batch])
            t1 = time.perf_counter()
            frame = send(grads, self.ps_link, self.counter, compression=self.compression)  # type: ignore[arg-type]
            push = self.ps.push_sync.remote(self.device, step, frame) if self.sync else \
                self.ps.push_async.remote(frame)
            self._load_weights(ray.get(push))
            compute_s, update_s = compute_s + t1 - t0, update_s + time.perf_counter() - t1
            if step % _RSS_CHECK_EVERY == 0:
                self._check_memory()
        if self.sync:
            ray.get(self.ps.leave.remote(self.device))
        n = len(order)
        return {"samples": float(n), "wall_seconds": time.perf_counter() - wall0,
                "compute_seconds_per_sample": compute_s / max(n, 1),
                "update_seconds_per_batch": update_s / max(-(-n // self.batch), 1)}

    def _obey(self) -> None:
        """Freeze while the device is stalled; cut or restore the link to the server."""
        cut = self.hb.obey()
        if (self.device, self.ps_peer) in cut or (self.ps_peer, self.device) in cut:
            self.ps_link.cut()
        else:
            self.ps_link.restore()

    def bytes_sent(self) -> dict[str, int]:
        """Raw and on-the-wire bytes this worker sent and received, in total."""
        total = self.counter.snapshot().total
        return {"frames": total.frames, "raw_bytes": total.raw_bytes,
                "wire_bytes": total.wire_bytes}

    def stop(self) -> None:
        self.hb.stop()
