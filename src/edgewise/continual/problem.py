"""The joint retraining-and-inference problem of Ekya §4.1 (Eq. 1) and its plan."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from edgewise.errors import ConfigError

__all__ = [
    "ContinualPlan",
    "ContinualProblem",
    "InferenceConfig",
    "InferenceOption",
    "RetrainConfig",
    "RetrainOption",
    "StreamDecision",
    "StreamState",
    "default_inference_configs",
    "default_retrain_configs",
]


@dataclass(frozen=True, slots=True)
class RetrainConfig:
    """A retraining configuration γ ∈ Γ (§3.1): the hyperparameters of one retraining job."""

    epochs: int
    batch_size: int
    last_layer_neurons: int
    layers_frozen: int
    data_fraction: float

    @property
    def name(self) -> str:
        return (f"e{self.epochs}-b{self.batch_size}-n{self.last_layer_neurons}"
                f"-f{self.layers_frozen}-d{self.data_fraction:g}")


@dataclass(frozen=True, slots=True)
class InferenceConfig:
    """An inference configuration λ ∈ Λ (§3.1): the fraction of frames analysed and the input
    resolution scale (1.0 = native)."""

    sampling_rate: float
    resolution_scale: float = 1.0

    @property
    def name(self) -> str:
        return f"s{self.sampling_rate:g}-r{self.resolution_scale:g}"


def default_retrain_configs() -> tuple[RetrainConfig, ...]:
    """The 18 retraining configurations of the evaluation (§6.3: "18 configurations per
    model"): epochs {5, 15, 30} × frozen layers {0, 2, 3} (of the digits CNN's four) ×
    data fraction {0.25, 1.0}; batch 32 and a 64-neuron last hidden layer."""
    return tuple(RetrainConfig(epochs, 32, 64, frozen, fraction)
                 for epochs in (5, 15, 30) for frozen in (0, 2, 3) for fraction in (0.25, 1.0))


def default_inference_configs() -> tuple[InferenceConfig, ...]:
    """Frame sampling rates 1, 3/4, 1/2, 1/4, 1/10 at native resolution: the subsampling knob
    the paper's simulator replays (§6.1)."""
    return tuple(InferenceConfig(rate) for rate in (1.0, 0.75, 0.5, 0.25, 0.1))


@dataclass(frozen=True, slots=True)
class RetrainOption:
    """One retraining configuration's profile for a stream in this window: the model's
    accuracy after retraining and the cost in accelerator-seconds at a whole accelerator
    (the micro-profiler's estimates, §4.3). ``checkpoints`` optionally lists the earlier
    epochs' checkpoints as (compute seconds from now, accuracy), increasing in compute and
    below ``cost_s``: only checkpoint-aware planning (§5) reads them."""

    config: str
    accuracy: float
    cost_s: float
    checkpoints: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {self.accuracy}", field="accuracy")
        if not self.cost_s > 0.0 or not math.isfinite(self.cost_s):
            raise ConfigError(f"must be a positive number, got {self.cost_s}", field="cost_s")
        times = [0.0, *(c for c, _ in self.checkpoints), self.cost_s]
        if any(b <= a for a, b in pairwise(times)) or any(
                not 0.0 <= a <= 1.0 for _, a in self.checkpoints):
            raise ConfigError("checkpoints need increasing compute in (0, cost_s) and "
                              "accuracies in [0, 1]", field="checkpoints")


@dataclass(frozen=True, slots=True)
class InferenceOption:
    """One inference configuration's profile for a stream: the fraction of the model's
    accuracy it keeps (1.0 at full rate and resolution) and the accelerator share it needs
    to keep up with the live stream."""

    config: str
    accuracy_factor: float
    demand: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy_factor <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {self.accuracy_factor}",
                              field="accuracy_factor")
        if not self.demand > 0.0:
            raise ConfigError(f"must be positive, got {self.demand}", field="demand")


@dataclass(frozen=True, slots=True)
class StreamState:
    """A video stream at a decision point: the deployed model's accuracy on the current
    window's data, its retraining options Γ (only the running one when a retraining is in
    progress, with its remaining cost; none once it has retrained) and inference options Λ."""

    name: str
    accuracy: float
    retrain: tuple[RetrainOption, ...]
    inference: tuple[InferenceOption, ...]

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {self.accuracy}",
                              field=f"{self.name}.accuracy")
        if not self.inference:
            raise ConfigError("needs at least one inference option",
                              field=f"{self.name}.inference")


@dataclass(frozen=True, slots=True)
class ContinualProblem:
    """Inputs of Algorithm 1 for one decision: the streams V, G accelerators, the (remaining)
    retraining window ‖T‖ in seconds, the stealing quantum Δ and the inference floor a_MIN."""

    streams: tuple[StreamState, ...]
    accelerators: float
    window_s: float
    delta: float = 0.1
    a_min: float = 0.0

    def __post_init__(self) -> None:
        if not self.streams:
            raise ConfigError("the problem has no stream", field="streams")
        if not self.accelerators > 0:
            raise ConfigError(f"must be positive, got {self.accelerators}", field="accelerators")
        if not self.window_s > 0:
            raise ConfigError(f"must be positive, got {self.window_s}", field="window_s")
        if not 0 < self.delta <= self.accelerators:
            raise ConfigError(f"must be in (0, accelerators], got {self.delta}", field="delta")
        if not 0.0 <= self.a_min <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {self.a_min}", field="a_min")
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ConfigError("stream names must be unique", field="streams")


@dataclass(frozen=True, slots=True)
class StreamDecision:
    """φ for one stream: retraining config γ (None: no retraining), inference config λ, and
    the shares R and I, in accelerator units."""

    stream: str
    retrain: str | None
    inference: str
    retrain_share: float
    inference_share: float


@dataclass(frozen=True, slots=True)
class ContinualPlan:
    """The decisions for every stream and the estimated window-averaged inference accuracy
    (the objective of Eq. 1); ``violations`` counts streams whose inference accuracy would
    fall below a_MIN."""

    decisions: tuple[StreamDecision, ...]
    accuracy: float
    violations: int = 0

    def decision(self, stream: str) -> StreamDecision:
        for d in self.decisions:
            if d.stream == stream:
                return d
        raise ConfigError(f"no decision for stream {stream!r}", field="stream")

    @property
    def total_share(self) -> float:
        return sum(d.retrain_share + d.inference_share for d in self.decisions)
