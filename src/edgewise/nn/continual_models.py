"""Ekya's models (§2.2): a compressed edge student and a larger golden teacher that labels."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.eager_optim import EagerAdam
from edgewise.nn.streams import N_CLASSES, Drift, apply_drift, stream_pools
from edgewise.nn.students import SpecStudent, student_from_text
from edgewise.nn.tracing import TRACE_LOCK
from edgewise.wire.frames import decode, to_torch
from edgewise.wire.state import encode_state_dict

__all__ = [
    "EDGE_LAYERS", "EdgeCNN", "GoldenCNN", "Student", "accuracy", "golden_label",
    "golden_model", "model_from_frame", "model_to_frame", "predict", "pretrained_edge",
    "retrain",
]  # fmt: skip

EDGE_LAYERS = 4  # parametric layers of the student: conv1, conv2, hidden dense, output
DEFAULT_NEURONS = 64
MAX_FRAME_BYTES = 256 << 20  # a user's student may be a few million parameters


class EdgeCNN(nn.Module):
    """The compressed student: two small convolutions and a dense head whose last hidden
    layer has ``neurons`` units (a retraining knob of §3.1)."""

    def __init__(self, neurons: int = DEFAULT_NEURONS, width: int = 6) -> None:
        super().__init__()
        if not 1 <= neurons <= 4096:
            raise ConfigError(f"neurons must be in 1..4096, got {neurons}", field="neurons")
        self.neurons = neurons
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.hidden = nn.Linear(2 * width * 16, neurons)
        self.out = nn.Linear(neurons, N_CLASSES)

    def layers(self) -> list[nn.Module]:
        """Parametric layers from input to output (freezing starts at the input)."""
        return [self.conv1, self.conv2, self.hidden, self.out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x))
        h = torch.max_pool2d(torch.relu(self.conv2(h)), 2)
        out: torch.Tensor = self.out(torch.relu(self.hidden(h.flatten(1))))
        return out


class GoldenCNN(nn.Module):
    """The expensive teacher: three wider convolutions and a wide head (~15x the student)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * width * 16, 128), nn.ReLU(),
                                  nn.Dropout(0.2), nn.Linear(128, N_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


Student = EdgeCNN | SpecStudent
"""Ekya's student: the built-in digits CNN, or a user's network from a workload spec."""


@contextmanager
def _one_thread() -> Iterator[None]:
    """Tiny models train fastest on one thread; many threads thrash a small, busy host."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _fit(model: nn.Module, x: NDArray[np.float32], y: NDArray[np.int64], epochs: int,
         batch_size: int, lr: float, seed: int,
         on_epoch: Callable[[int], None] | None = None,
         on_step: Callable[[], None] | None = None) -> None:
    """Adam on (x, y) for ``epochs`` shuffled passes; ``on_step()`` after every mini-batch
    (the co-located runtime throttles there), ``on_epoch(k)`` after pass k."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("every layer is frozen; nothing to retrain", field="frozen_layers")
    opt = EagerAdam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    with TRACE_LOCK:  # a trace in another thread of this process would capture the passes
        _passes(model, opt, gen, xt, yt, epochs, batch_size, on_epoch, on_step)
    model.eval()


def _passes(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator,
            xt: torch.Tensor, yt: torch.Tensor, epochs: int, batch_size: int,
            on_epoch: Callable[[int], None] | None,
            on_step: Callable[[], None] | None) -> None:
    model.train()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(yt), generator=gen)
        for start in range(0, len(yt), batch_size):
            idx = order[start : start + batch_size]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()  # type: ignore[no-untyped-call]
            opt.step()
            if on_step is not None:
                on_step()
        if on_epoch is not None:
            model.eval()
            on_epoch(epoch)
            model.train()


def _augmented_pool(seed: int, copies: int, severity: float) -> tuple[NDArray[np.float32],
                                                                      NDArray[np.int64]]:
    """The golden pool, clean plus ``copies`` randomly drifted copies of every image."""
    from edgewise.nn.data import _digits

    full = _digits()
    golden, _, _ = stream_pools()
    rng = np.random.default_rng([seed, 5])
    xs, ys = [full.x[golden]], [full.y[golden]]
    for _ in range(copies):
        drift = Drift(tuple([0.1] * N_CLASSES), 0.0, 1.0, 0.0, 0.0)
        parts = []
        for img in full.x[golden]:
            d = Drift(drift.class_mix, float(rng.uniform(-60, 60)) * severity,
                      float(rng.uniform(0.35, 1.0)), float(rng.uniform(0.0, 1.2)) * severity,
                      float(rng.uniform(0.0, 0.45)) * severity)
            parts.append(apply_drift(img[None], d, rng)[0])
        xs.append(np.stack(parts))
        ys.append(full.y[golden])
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys)


@cache
def golden_model(seed: int = 0, epochs: int = 12) -> GoldenCNN:
    """The teacher, trained on the golden pool under every kind of drift (cached)."""
    x, y = _augmented_pool(seed, copies=3, severity=1.0)
    torch.manual_seed(seed)
    model = GoldenCNN()
    with _one_thread():
        _fit(model, x, y, epochs, batch_size=64, lr=2e-3, seed=seed)
    return model


@cache
def pretrained_edge(seed: int = 0, neurons: int = DEFAULT_NEURONS, epochs: int = 8) -> EdgeCNN:
    """The deployed student before any drift: trained on the clean golden pool (cached;
    callers must copy it before retraining)."""
    from edgewise.nn.data import _digits

    full = _digits()
    golden, _, _ = stream_pools()
    torch.manual_seed(seed)
    model = EdgeCNN(neurons)
    with _one_thread():
        _fit(model, full.x[golden], full.y[golden], epochs, batch_size=32, lr=3e-3, seed=seed)
    return model


@torch.no_grad()
def predict(model: nn.Module, x: NDArray[np.float32]) -> NDArray[np.int64]:
    model.eval()
    if len(x) == 0:
        return np.zeros(0, dtype=np.int64)
    with TRACE_LOCK:
        out = model(torch.from_numpy(np.ascontiguousarray(x)))
    labels: NDArray[np.int64] = out.argmax(1).numpy().astype(np.int64)
    return labels


def accuracy(model: nn.Module, x: NDArray[np.float32], y: NDArray[np.int64]) -> float:
    """Fraction of frames classified as ``y`` (frames labelled -1 are ignored)."""
    known = y >= 0
    if not known.any():
        raise ConfigError("no labelled frames to measure accuracy on", field="labels")
    return float((predict(model, x[known]) == y[known]).mean())


def golden_label(golden: nn.Module, x: NDArray[np.float32]) -> NDArray[np.int64]:
    """The teacher's labels for retraining frames (§2.2)."""
    return predict(golden, x)


def retrain(model: Student, x: NDArray[np.float32], y: NDArray[np.int64], *, epochs: int,
            batch_size: int, neurons: int, frozen_layers: int, lr: float = 3e-3, seed: int = 0,
            on_epoch: Callable[[int, Student], None] | None = None,
            on_step: Callable[[], None] | None = None) -> Student:
    """A retrained copy of ``model``: the built-in student's hidden layer resized to
    ``neurons`` (re-initialised when the size changes; a user's student keeps its own), the
    first ``frozen_layers`` layers (groups of layers of a user's student) frozen, trained on
    (x, y)."""
    if not 0 <= frozen_layers < EDGE_LAYERS:
        raise ConfigError(f"frozen_layers must be in 0..{EDGE_LAYERS - 1}",
                          field="frozen_layers")
    if epochs < 1 or batch_size < 1:
        raise ConfigError("epochs and batch_size must be >= 1", field="retrain_config")
    torch.manual_seed(seed)
    student: Student
    if isinstance(model, SpecStudent):
        student = copy.deepcopy(model)
    else:
        student = EdgeCNN(neurons)
        source = model.state_dict()
        keep = {k: v for k, v in source.items()
                if neurons == model.neurons or k.startswith(("conv1", "conv2"))}
        student.load_state_dict(keep, strict=False)
    for layer in student.layers()[:frozen_layers]:
        for p in layer.parameters():
            p.requires_grad_(False)
    hook = None if on_epoch is None else (lambda k: on_epoch(k, student))
    with _one_thread():
        _fit(student, x, y, epochs, batch_size, lr, seed, hook, on_step)
    return student


def model_to_frame(model: Student) -> bytes:
    """The student's weights as a transport frame (no pickle); a user's student's frame
    names its workload spec, so that the receiver rebuilds the same network."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    meta: dict[str, object] = ({"student": model.text} if isinstance(model, SpecStudent)
                               else {"neurons": model.neurons})
    return encode_state_dict(state, meta=meta)


def model_from_frame(frame: bytes) -> Student:
    """A student rebuilt from a frame made by :func:`model_to_frame`."""
    decoded = decode(frame, max_decoded_bytes=MAX_FRAME_BYTES)
    state = to_torch(decoded)
    spec = decoded.meta.get("student")
    if isinstance(spec, str):
        return student_from_text(spec, state)
    weight = state.get("out.weight")
    if weight is None or weight.ndim != 2:
        raise ConfigError("frame holds no edge-model weights", field="weights")
    model = EdgeCNN(int(weight.shape[1]))
    model.load_state_dict(state)
    model.eval()
    return model
