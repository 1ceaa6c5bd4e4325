"""Co-located retraining and inference actors sharing one device's compute (Ekya §5).

On CPU a share is enforced by time-slicing: after each compute step that used ``c`` seconds
of its thread's CPU time, an actor with share ``s`` of a device with stretch ``k`` sleeps so
that the step lasts ``c·k/s`` seconds, i.e. it computes during only its fraction of each
slice. Where CUDA exists, the share is also handed to NVIDIA MPS through
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` in the actor's environment (fixed at actor start, as
the paper notes). Weights travel as transport frames, never pickles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.continual_models import (
    EdgeCNN,
    Student,
    model_from_frame,
    model_to_frame,
    retrain,
)
from edgewise.nn.eager_optim import EagerSGD
from edgewise.runtime.throttle import Throttle

__all__ = ["InferenceActor", "RetrainActor", "mps_env", "sampled_predictions", "throttled"]


def _check_share(share: float) -> float:
    if not 0.0 < share <= 1.0:
        raise ConfigError(f"a share must be in (0, 1], got {share}", field="share")
    return share


@contextmanager
def throttled(share: float, stretch: float = 1.0) -> Iterator[None]:
    """Run the body, then sleep so that it lasts ``stretch / share`` times its CPU time."""
    with Throttle(stretch / _check_share(share)).step():
        yield


def mps_env(share: float) -> dict[str, str]:
    """The MPS thread percentage for ``share`` when a CUDA device exists, else nothing."""
    _check_share(share)
    if not torch.cuda.is_available():
        return {}
    return {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(1, round(100 * share)))}


def sampled_predictions(processed: dict[int, int], n_frames: int) -> NDArray[np.int64]:
    """Each frame's label: that of the latest analysed frame at or before it (-1 before the
    first), as when inference samples frames of a live video (§3.1)."""
    out = np.full(n_frames, -1, dtype=np.int64)
    last = -1
    for i in range(n_frames):
        last = processed.get(i, last)
        out[i] = last
    return out


class InferenceActor:
    """The inference job of one stream: analyses live frames as they arrive, at its share of
    the device; a second thread hot-loads improved weights (run with max_concurrency >= 2)."""

    def __init__(self, weights: bytes, stretch: float = 1.0) -> None:
        torch.set_num_threads(1)
        self._model = model_from_frame(weights)
        self._version = 0
        self._stretch = stretch
        self._share = 1.0
        self._step = 1
        self._lock = threading.Lock()

    def load_weights(self, frame: bytes, version: int) -> int:
        """Swap in a checkpoint (decoded from a frame); returns the version now served."""
        model = model_from_frame(frame)
        with self._lock:
            if version > self._version:
                self._model, self._version = model, version
            return self._version

    def set_share(self, share: float, sampling_rate: float | None = None) -> None:
        """The share (and optionally λ's frame sampling rate) from the next frame on."""
        self._share = _check_share(share)
        if sampling_rate is not None:
            if not 0.0 < sampling_rate <= 1.0:
                raise ConfigError("sampling_rate must be in (0, 1]", field="sampling_rate")
            self._step = max(1, round(1.0 / sampling_rate))

    def predict(self, x: NDArray[np.float32]) -> list[int]:
        with self._lock:
            model = self._model
        with torch.no_grad():
            return [int(v) for v in model(torch.from_numpy(x)).argmax(1)]

    def run_window(self, x: NDArray[np.float32], window_s: float, sampling_rate: float,
                   share: float) -> dict[str, Any]:
        """Serve one window: frame i arrives at i·window_s/N; every 1/rate-th frame is a
        candidate and the actor always takes the newest candidate that has arrived (it never
        queues). Returns the label of every frame and the model version per analysed frame."""
        if not 0.0 < sampling_rate <= 1.0:
            raise ConfigError("sampling_rate must be in (0, 1]", field="sampling_rate")
        self.set_share(share, sampling_rate)
        n = len(x)
        processed: dict[int, int] = {}
        versions: list[int] = []
        start = time.perf_counter()
        last = -1
        while (elapsed := time.perf_counter() - start) < window_s:
            newest = min(n - 1, int(elapsed * n / window_s))
            frame = newest - newest % self._step
            if frame <= last:
                time.sleep(min(0.002, window_s / n))
                continue
            with throttled(self._share, self._stretch):
                with self._lock:
                    model, version = self._model, self._version
                with torch.no_grad():
                    label = int(model(torch.from_numpy(x[frame : frame + 1])).argmax(1)[0])
            processed[frame] = label
            versions.append(version)
            last = frame
        labels = sampled_predictions(processed, n)
        return {"labels": labels.tolist(), "analysed": len(processed), "versions": versions}


class RetrainActor:
    """The retraining job of one stream: retrains at its share of the device, checkpointing
    every epoch into the inference actor (hot-load), and stops at the window's deadline."""

    def __init__(self, stretch: float = 1.0) -> None:
        torch.set_num_threads(1)
        self._stretch = stretch
        self._share = 1.0

    def set_share(self, share: float) -> None:
        """Change the running retraining's share (the scheduler re-ran, Algorithm 1); takes
        effect from the next step (run the actor with max_concurrency >= 2)."""
        self._share = _check_share(share)

    def retrain(self, weights: bytes, x: NDArray[np.float32], y: NDArray[np.int64],
                config: dict[str, Any], share: float, deadline_s: float,
                inference: Any | None = None) -> dict[str, Any]:
        """Retrain with ``config`` (epochs, batch_size, last_layer_neurons, layers_frozen);
        every epoch's weights go to ``inference.load_weights``. Returns the last weights,
        the epochs done, the wall seconds until the last of them and the device-seconds they
        used (each step's wall time × the share it ran at)."""
        self._share = _check_share(share)
        model = model_from_frame(weights)
        start = time.perf_counter()
        state: dict[str, Any] = {"epochs": 0, "frame": weights, "device_s": 0.0, "used": 0.0}

        def checkpoint(epoch: int, student: Student) -> None:
            throttle_step()  # the epoch's last step is device compute
            frame = model_to_frame(student)
            state.update(epochs=epoch, frame=frame, seconds=time.perf_counter() - start,
                         used=state["device_s"])
            state.setdefault("first_s", state["device_s"])
            if inference is not None:
                inference.load_weights.remote(frame, int(config.get("version_base", 0)) + epoch)
            # copying weights out and sending them is host work, not the device's compute
            throttle.mark()
            if time.perf_counter() - start > deadline_s:
                raise _Deadline

        def throttle_step() -> None:
            step_share = self._share  # the share may change between steps
            state["device_s"] += throttle.pace(self._stretch / step_share) * step_share

        throttle = Throttle(self._stretch)
        with suppress(_Deadline):
            retrain(model, x, y, epochs=int(config["epochs"]),
                    batch_size=int(config["batch_size"]),
                    neurons=int(config["last_layer_neurons"]),
                    frozen_layers=int(config["layers_frozen"]), seed=int(config.get("seed", 0)),
                    on_epoch=checkpoint, on_step=throttle_step)
        return {"frame": state["frame"], "epochs": state["epochs"],
                "seconds": state.get("seconds", time.perf_counter() - start),
                "device_s": state["used"], "first_s": state.get("first_s", 0.0),
                "finished": state["epochs"] >= int(config["epochs"])}

    def epoch_cost(self, weights: bytes, x: NDArray[np.float32], y: NDArray[np.int64],
                   configs: list[dict[str, Any]], share: float = 1.0) -> list[float]:
        """Device-seconds per trained sample of each configuration, measured here as its
        retraining is paid: two epochs on (x, y) under the throttle, the second timed (the
        first pays one-off costs). For the micro-profiler's per-epoch cost (§4.3)."""
        out = []
        for config in configs:
            result = self.retrain(weights, x, y, {**config, "epochs": 2}, share, float("inf"))
            out.append((result["device_s"] - result["first_s"]) / len(y))
        return out

    def spin(self, seconds: float, share: float, batch: int = 32) -> float:
        """Training throughput in samples per second at ``share`` over ``seconds``."""
        _check_share(share)
        model = EdgeCNN()
        opt = EagerSGD(model.parameters(), lr=0.01)
        x, y = torch.rand(batch, 1, 8, 8), torch.randint(0, 10, (batch,))
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            with throttled(share, self._stretch):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
                opt.step()
            done += batch
        return done / (time.perf_counter() - start)


class _Deadline(Exception):
    """Raised inside training when the window ends; the last checkpoint stands."""
