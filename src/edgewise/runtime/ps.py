"""The parameter server actor (Deep-Edge Fig. 2): asynchronous and synchronous SGD."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import ray
import torch

from edgewise.nn.models import build_model, make_optimizer
from edgewise.runtime.emulation import emulated_compute
from edgewise.wire.frames import decode, encode, to_torch

__all__ = ["ParameterServer"]


@ray.remote(max_concurrency=32)  # type: ignore[call-overload]
class ParameterServer:
    """Holds the model; applies gradients as they arrive (async) or once every active worker
    pushed for a step (sync); records which samples each applied update trained, checkpoints
    at epoch ends and measures validation accuracy."""

    def __init__(self, model: str, seed: int, optimizer: str, lr: float, momentum: float,
                 stretch: float, validation: bytes, checkpoint: bytes | None = None,
                 compression: str = "lz4") -> None:
        torch.set_num_threads(1)
        self.model = build_model(model, seed)
        self.opt = make_optimizer(optimizer, self.model, lr, momentum)
        self.stretch, self.compression = stretch, compression
        val = decode(validation).arrays
        self.val_x = torch.from_numpy(val["x"].copy())
        self.val_y = torch.from_numpy(val["y"].copy())
        self.lock = threading.Condition()
        self.epoch, self.updates, self.samples_this_epoch = 0, 0, 0
        self.applied: list[np.ndarray] = []
        self.active: set[str] = set()
        self.pending: dict[str, tuple[dict[str, torch.Tensor], int]] = {}
        self.step_done = self.pending_step = -1
        if checkpoint is not None:
            self._restore(checkpoint)

    def _restore(self, frame: bytes) -> None:
        """Weights and optimiser state from a checkpoint frame (see :meth:`_checkpoint`)."""
        tensors = to_torch(decode(frame))
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                p.copy_(tensors[f"w.{name}"])
                prefix, suffix = "o.", f".{name}"
                state = {k[len(prefix) : -len(suffix)]: v for k, v in tensors.items()
                         if k.startswith(prefix) and k.endswith(suffix)}
                if state:
                    self.opt.state[p] = state

    def _checkpoint(self) -> dict[str, torch.Tensor]:
        """Weights as ``w.<param>``, optimiser state as ``o.<key>.<param>``."""
        out: dict[str, torch.Tensor] = {}
        for name, p in self.model.named_parameters():
            out[f"w.{name}"] = p.detach()
            for key, value in self.opt.state.get(p, {}).items():
                if isinstance(value, torch.Tensor):
                    out[f"o.{key}.{name}"] = value
        return out

    def _weights(self) -> bytes:
        return encode({n: p.detach() for n, p in self.model.named_parameters()},
                      compression=self.compression, meta={"updates": self.updates})  # type: ignore[arg-type]

    def _apply(self, grads: dict[str, torch.Tensor]) -> None:
        with emulated_compute(self.stretch):
            for name, p in self.model.named_parameters():
                p.grad = grads[name]
            self.opt.step()
        self.updates += 1

    def begin_epoch(self, epoch: int, workers: list[str]) -> None:
        with self.lock:
            self.epoch, self.applied, self.samples_this_epoch = epoch, [], 0
            self.active, self.pending = set(workers), {}
            self.step_done = self.pending_step = -1

    def pull(self) -> bytes:
        with self.lock:
            return self._weights()

    def push_async(self, frame: bytes) -> bytes:
        """Apply one worker's gradients at once and return the new weights (async loop)."""
        decoded = decode(frame)
        grads = to_torch(decoded)
        ids = grads.pop("ids").numpy()
        with self.lock:
            self._apply(grads)
            self.applied.append(ids)
            self.samples_this_epoch += len(ids)
            return self._weights()

    def push_sync(self, worker: str, step: int, frame: bytes) -> bytes:
        """Wait until every active worker pushed for ``step``, apply their sample-weighted
        mean gradient once, and return the new weights (sync loop)."""
        grads = to_torch(decode(frame))
        ids = grads.pop("ids").numpy()
        with self.lock:
            self.pending[worker] = (grads, len(ids))
            self.pending_step = step
            self.applied.append(ids)
            self._maybe_step()
            self.lock.wait_for(lambda: self.step_done >= step)
            return self._weights()

    def leave(self, worker: str) -> None:
        """``worker`` has no batches left this epoch; steps no longer wait for it."""
        with self.lock:
            self.active.discard(worker)
            self._maybe_step()

    def _maybe_step(self) -> None:
        if not self.pending or not self.active.issubset(self.pending):
            return
        total = sum(n for _, n in self.pending.values())
        names = next(iter(self.pending.values()))[0].keys()
        mean = {k: sum(g[k] * (n / total) for g, n in self.pending.values()) for k in names}
        self._apply(mean)  # type: ignore[arg-type]
        self.samples_this_epoch += total
        self.pending, self.step_done = {}, self.pending_step
        self.lock.notify_all()

    def progress(self) -> tuple[int, int]:
        return self.epoch, self.samples_this_epoch

    def finish_epoch(self) -> dict[str, Any]:
        """Checkpoint (weights and momentum) and validation accuracy at an epoch's end."""
        with self.lock:
            t0 = time.perf_counter()
            with torch.no_grad(), emulated_compute(self.stretch):
                pred = self.model(self.val_x).argmax(dim=1)
                accuracy = float((pred == self.val_y).float().mean())
            state = self._checkpoint()
            ids = np.concatenate(self.applied) if self.applied else np.zeros(0, np.int64)
            checkpoint = encode(state, compression=self.compression,  # type: ignore[arg-type]
                                meta={"epoch": self.epoch, "updates": self.updates})
            return {"epoch": self.epoch, "val_accuracy": accuracy, "checkpoint": checkpoint,
                    "applied_ids": encode({"ids": ids}), "updates": self.updates,
                    "validation_seconds": time.perf_counter() - t0}
