"""The parameter server actor (Deep-Edge Fig. 2): asynchronous and synchronous SGD."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from functools import partial
from typing import Any

import numpy as np
import ray
import torch

from edgewise.nn.models import NO_WARMUP, Warmup, epoch_lr, make_optimizer
from edgewise.nn.workload import Workload, build_model, builtin_workload
from edgewise.runtime.asyncapply import StaleApplier
from edgewise.runtime.datastore import read_frames
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.evaluate import calibration_samples, load_statistics, validation_metric
from edgewise.runtime.noise_scale import NoiseScale, adam_divisor, grad_sq
from edgewise.runtime.pscheckpoint import checkpoint_frame, restore
from edgewise.runtime.psplane import Endpoint
from edgewise.runtime.psserve import PlaneServer
from edgewise.runtime.shards import StepSquares
from edgewise.runtime.staleness import Treatment
from edgewise.runtime.syncdelta import SyncDeltas
from edgewise.runtime.trainstate import FlatState, Frame, Pushed, mean_pushes
from edgewise.wire.frames import WireDtype, encode

__all__ = ["ParameterServer"]

def _stopped() -> RuntimeError:
    return RuntimeError("the parameter server stopped (its run was torn down)")


def push_bound(model_bytes: int) -> int:
    """The largest push the data plane reads: at most the model's flat tensors (LZ4 may grow
    them by 0.4 %) and ids; twice that and 8 MiB (a million ids) is room, and a bound."""
    return 2 * model_bytes + (8 << 20)


@ray.remote(max_concurrency=32)  # type: ignore[call-overload]
class ParameterServer:
    """Holds the model; applies gradients as they arrive (async) or once every active worker
    pushed for a step (sync); records which samples each applied update trained, checkpoints
    at epoch ends and measures validation accuracy (the workload's metric).

    ``model`` is a workload (or a built-in model name, on digits); the server builds it with
    its weights file, if any. ``validation`` is one or more data-store frames."""

    def __init__(self, model: str | Workload, seed: int, optimizer: str, lr: float,
                 momentum: float, stretch: float, validation: bytes | list[bytes],
                 checkpoint: bytes | None = None, compression: str = "lz4", *,
                 schedule: str = "constant", epochs: int = 1, warmup: Warmup = NO_WARMUP,
                 treatment: Treatment | None = None,
                 calibration: list[bytes] | None = None, transport: str = "socket",
                 wire_dtype: WireDtype = "float32", sync_deltas: bool = False,
                 shard: tuple[int, int] = (0, 1)) -> None:
        torch.set_num_threads(1)
        self.rate_of = partial(epoch_lr, lr, schedule, epochs=max(epochs, 1), warmup=warmup)
        self.workload = builtin_workload(model) if isinstance(model, str) else model
        task = self.workload.task
        self.model = build_model(self.workload, seed=seed, num_classes=task.num_classes,
                                 input_shape=task.input_shape)
        self.flat = FlatState(self.model, wire_dtype, shard)  # a shard: runtime.shards
        self.flat_params = self.flat.optimizer_parameters()
        self.opt = make_optimizer(optimizer, self.flat_params.values(), lr, momentum)
        self.stretch, self.compression, self.lr_now = stretch, compression, lr
        frames = [validation] if isinstance(validation, bytes) else list(validation)
        val = read_frames(frames, self.workload)
        self.val_x, self.val_y = torch.from_numpy(val.x), torch.from_numpy(val.y)
        self.calib_x = calibration_samples(calibration or [], self.workload)
        self.applier = StaleApplier(treatment or Treatment(), self.flat, self.opt)
        self.clock: dict[str, int] = {}  # pushes per worker this epoch (SSP's clocks)
        self.lock = threading.Lock()
        # replies that wait: a synchronous push until its step is taken, (step, future);
        # a push under SSP until its worker is within the bound, (worker, future)
        self.sync_waiting: list[tuple[int, Future[Frame]]] = []
        self.ssp_waiting: list[tuple[str, Future[Frame]]] = []
        self.epoch, self.samples_this_epoch = 0, 0
        self.applied: list[np.ndarray] = []
        self.active: set[str] = set()
        self.pending: dict[str, Pushed] = {}
        self.cached: tuple[int, Frame] = (-1, np.zeros(0, np.uint8))
        self.push_seconds = 0.0  # time spent serving pushes this epoch (decode, step, encode)
        self.noise = NoiseScale()  # the sync loop's gradient noise scale, this epoch
        self.noise_adam = NoiseScale()  # the same of the Adam-preconditioned gradients
        self.squares: list[StepSquares] = []  # the noise's squares, a shard's to pool
        self.step_done = self.pending_step = -1
        self.stopped = False
        self.kept: tuple[int, bytes] = (-1, b"")  # finish_epoch's checkpoint, if kept
        if checkpoint is not None:
            self.applier.ledger.version = restore(checkpoint, self.flat, self.flat_params,
                                                  self.opt)
        # a synchronous run's replies on a narrowed wire: changes, not weights (syncdelta)
        self.deltas = SyncDeltas(self.flat, self.updates) \
            if sync_deltas and self.flat.wire != "float32" else None
        self.cached_change: tuple[int, Frame] = (-1, np.zeros(0, np.uint8))
        # the workers' pushes and pulls: over sockets of their own (runtime.psplane), or
        # as Ray calls (transport "ray"; then this server opens no port)
        host: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self.plane = PlaneServer(self, host, max_request_bytes=push_bound(self.flat.nbytes)) \
            if transport == "socket" else None

    def plane_endpoint(self) -> Endpoint | None:
        """Where the workers push and pull over sockets, or None (they use Ray calls)."""
        return None if self.plane is None else self.plane.endpoint

    def stop(self) -> None:
        """Close the data plane and release every push still waiting (a run torn down
        mid-step): they fail instead of holding this member after its run."""
        with self.lock:
            self.stopped = True
            self._release()
        if self.plane is not None:
            self.plane.close()

    @property
    def updates(self) -> int:
        """The server's version: the updates it has applied."""
        return self.applier.ledger.version

    def _weights(self) -> Frame:
        """The current weights frame, encoded once per update (pulls and sync replies share
        it); a uint8 array, which Ray hands over without copying it into a bytes object."""
        if self.cached[0] != self.updates:
            meta = {"updates": self.updates}
            if self.deltas is not None:  # what every worker holds after this version's change
                self._change()
                frame = self.deltas.full_frame(self.compression, meta)  # type: ignore[arg-type]
            else:
                frame = self.flat.weights_frame(self.compression, meta)  # type: ignore[arg-type]
            self.cached = (self.updates, np.frombuffer(frame, np.uint8))
        return self.cached[1]

    def _change(self) -> Frame:
        """A synchronous step's reply with ``sync_deltas``: the change from the version the
        workers hold, encoded once per update (``runtime.syncdelta``)."""
        assert self.deltas is not None
        if self.cached_change[0] != self.updates:
            frame = self.deltas.delta_frame(self.updates, self.compression)  # type: ignore[arg-type]
            self.cached_change = (self.updates, np.frombuffer(frame, np.uint8))
        return self.cached_change[1]

    def _apply(self, flats: dict[str, torch.Tensor], lr_factor: float = 1.0) -> None:
        """One optimiser step with the pushed gradients (its learning rate times
        ``lr_factor``); adopt the pushed buffers. The version was advanced by the ledger."""
        with emulated_compute(self.stretch):
            self.flat.apply_push(flats)
            for group in self.opt.param_groups:
                group["lr"] = self.lr_now * lr_factor
            self.opt.step()

    def begin_epoch(self, epoch: int, workers: list[str]) -> None:
        with self.lock:
            self.lr_now = self.rate_of(epoch=epoch)
            self.epoch, self.applied, self.samples_this_epoch = epoch, [], 0
            self.push_seconds = 0.0
            self.noise.reset()
            self.noise_adam.reset()
            self.squares = []
            self.applier.ledger.reset()
            self.clock = dict.fromkeys(workers, 0)
            self.active, self.pending = set(workers), {}
            self.step_done = self.pending_step = -1
            self._release()

    def pull(self, worker: str = "") -> Frame:
        with self.lock:
            return self._handed_out(worker)

    def push_async(self, frame: Frame, worker: str = "") -> Frame:
        """:meth:`push_async_later`, waited for (a Ray call's thread waits here)."""
        return self.push_async_later(frame, worker).result()

    def push_async_later(self, frame: Frame, worker: str = "") -> Future[Frame]:
        """Apply one worker's gradients at once, under the staleness treatment; the future's
        result is the new weights (async loop). Under SSP it is resolved only once
        ``worker`` is no more than the bound's clocks ahead of the slowest worker still in
        the epoch (with the weights then current)."""
        started = time.perf_counter()
        pushed = self.flat.read_push(frame)  # decoded outside the lock (Ray's threads)
        with self.lock:
            flats, factor = self.applier.treat(pushed)
            before = {k: v.clone() for k, v in self.flat.flats.items()
                      if k.startswith("p.")} if self.applier.treatment.name == "gap-aware" else {}
            self._apply(flats, factor)
            self.applier.observe_step(before)
            self.applied.append(pushed.ids)
            self.samples_this_epoch += len(pushed.ids)
            self.push_seconds += time.perf_counter() - started
            reply: Future[Frame] = Future()
            if self.applier.treatment.name == "ssp" and worker in self.clock:
                self.clock[worker] += 1
                self.ssp_waiting.append((worker, reply))
                self._release()
            else:
                reply.set_result(self._handed_out(worker))
            return reply

    def _handed_out(self, worker: str) -> Frame:
        """The current weights, as ``worker``'s reply (its staleness counts from here)."""
        self.applier.hand_out(worker)
        return self._weights()

    def _release(self) -> None:
        """Answer every waiting reply that may go on now (under the lock): synchronous pushes
        whose step was taken, SSP pushes whose worker is within the bound; all of them fail
        once the server stopped."""
        if self.stopped:
            for _, future in (*self.sync_waiting, *self.ssp_waiting):
                future.set_exception(_stopped())
            self.sync_waiting, self.ssp_waiting = [], []
            return
        done = [f for s, f in self.sync_waiting if self.step_done >= s]
        if done:
            self.sync_waiting = [(s, f) for s, f in self.sync_waiting if self.step_done < s]
            weights = self._weights() if self.deltas is None else self._change()
            for future in done:
                future.set_result(weights)
        free = [(w, f) for w, f in self.ssp_waiting if self._within_bound(w)]
        if free:
            self.ssp_waiting = [(w, f) for w, f in self.ssp_waiting if not self._within_bound(w)]
            for worker, future in free:
                future.set_result(self._handed_out(worker))

    def _within_bound(self, worker: str) -> bool:
        active = [c for w, c in self.clock.items() if w in self.active]
        return worker not in self.active or not active or \
            self.clock[worker] - min(active) <= self.applier.treatment.ssp_bound

    def push_sync(self, worker: str, step: int, frame: Frame) -> Frame:
        """:meth:`push_sync_later`, waited for (a Ray call's thread waits here)."""
        return self.push_sync_later(worker, step, frame).result()

    def push_sync_later(self, worker: str, step: int, frame: Frame) -> Future[Frame]:
        """Hold ``worker``'s gradients for ``step``; once every active worker pushed for it,
        apply their sample-weighted mean once. The future's result is the weights after that
        step (sync loop)."""
        pushed = self.flat.read_push(frame)
        reply: Future[Frame] = Future()
        with self.lock:
            if self.stopped:
                reply.set_exception(_stopped())
                return reply
            self.pending[worker] = pushed
            self.pending_step = step
            self.applied.append(pushed.ids)
            self.sync_waiting.append((step, reply))
            self._maybe_step()
            return reply

    def leave(self, worker: str) -> None:
        """``worker`` has no batches left this epoch; steps no longer wait for it."""
        with self.lock:
            self.active.discard(worker)
            self._maybe_step()
            self._release()

    def _maybe_step(self) -> None:
        if not self.pending or not self.active.issubset(self.pending):
            return
        # in the workers' order, not their arrival's: the same sums in the same order, so a
        # synchronous job run again with the same seed takes the same steps
        pushes = [self.pending[w] for w in sorted(self.pending)]
        total = sum(len(p.ids) for p in pushes)
        version = self.updates
        self.applier.ledger.step(version if p.base < 0 else min(p.base, version) for p in pushes)
        mean = mean_pushes(pushes)
        self._observe_noise(pushes, mean)
        self._apply(mean)
        self.samples_this_epoch += total
        self.pending, self.step_done = {}, self.pending_step
        self._release()

    def _observe_noise(self, pushes: list[Pushed], mean: dict[str, torch.Tensor]) -> None:
        """The step's squared norms for the gradient noise scale (``runtime.noise_scale``);
        a shard's are kept for the engine to pool (``runtime.shards.pooled_noise``)."""
        plain = [(len(p.ids), grad_sq(p.flats)) for p in pushes]
        self.noise.observe(plain, mean_sq := grad_sq(mean))
        divisor = adam_divisor(self.opt, self.flat_params)  # before this step's update
        adam: tuple[list[float] | None, float | None] = (None, None)
        if divisor is not None:
            adam = ([grad_sq(p.flats, divisor) for p in pushes], grad_sq(mean, divisor))
            self.noise_adam.observe([(b, sq) for (b, _), sq in zip(plain, adam[0], strict=True)],
                                    adam[1])
        if self.flat.shard[1] > 1:
            self.squares.append((plain, mean_sq, *adam))

    def _accuracy(self) -> float:
        """The workload's metric on the validation set (``runtime.evaluate``)."""
        return validation_metric(self.model, self.workload.task, self.val_x, self.val_y,
                                 self.calib_x)

    def weights(self) -> Frame:
        """The current weights at float32 whatever the wire dtype, for the engine's
        evaluating worker: the metric is the server's weights', not a rounded copy's (not
        a pull: no staleness is counted for it)."""
        with self.lock:
            if self.flat.wire == "float32":
                return self._weights()
            frame = self.flat.weights_frame(self.compression,  # type: ignore[arg-type]
                                            {"updates": self.updates}, narrow=False)
            return np.frombuffer(frame, np.uint8)

    def progress(self) -> tuple[int, int]:
        return self.epoch, self.samples_this_epoch

    def finish_epoch(self, evaluate: bool = True, statistics: bytes | None = None, *,
                     keep_checkpoint: bool = False) -> dict[str, Any]:
        """Checkpoint (weights and momentum) at an epoch's end, and the validation metric
        measured here (NaN with ``evaluate=False``: the engine measures it on a worker, and
        passes the BatchNorm ``statistics`` it measured with, which the server takes in place
        of its own, as evaluating here re-estimates them in place). With
        ``keep_checkpoint`` the checkpoint stays here for :meth:`kept_checkpoint` instead of
        riding in the reply: the engine fetches it while the next epoch trains."""
        out = self._finish(evaluate, statistics)
        if keep_checkpoint:
            self.kept = (self.epoch, out.pop("checkpoint"))
        return out

    def kept_checkpoint(self, epoch: int) -> bytes:
        """The checkpoint :meth:`finish_epoch` kept for ``epoch``."""
        kept_epoch, frame = self.kept
        if kept_epoch != epoch:
            raise RuntimeError(f"the server keeps the checkpoint of epoch {kept_epoch}, "
                               f"not of epoch {epoch}")
        return frame

    def _finish(self, evaluate: bool, statistics: bytes | None) -> dict[str, Any]:
        with self.lock:
            t0 = time.perf_counter()
            if statistics is not None:
                load_statistics(self.model, statistics)
            with emulated_compute(self.stretch):
                accuracy = self._accuracy() if evaluate else float("nan")
            checkpoint = checkpoint_frame(self.flat, self.flat_params, self.opt,
                                          self.compression,  # type: ignore[arg-type]
                                          {"epoch": self.epoch, "updates": self.updates})
            ids = np.concatenate(self.applied) if self.applied else np.zeros(0, np.int64)
            return {"epoch": self.epoch, "val_accuracy": accuracy, "checkpoint": checkpoint,
                    "applied_ids": encode({"ids": ids}), "updates": self.updates,
                    "push_seconds": self.push_seconds,
                    "staleness_mean": self.applier.ledger.mean, "learning_rate": self.lr_now,
                    "staleness_max": self.applier.ledger.max,
                    "noise_scale": self.noise.simple(),
                    "noise_scale_adam": self.noise_adam.simple(),
                    "noise_squares": self.squares,
                    "validation_seconds": time.perf_counter() - t0}
