"""The model-update problem of Deep-Edge §III and its plan (D, B)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from edgewise.errors import ConfigError
from edgewise.perf.schema import PerfModel

__all__ = ["MEM_LIMIT_PERCENT", "USER_BATCH", "AppLimit", "UpdatePlan", "UpdateProblem",
           "WorkerState"]

MEM_LIMIT_PERCENT = 85.0  # GetMaxBatchSize's default limit: where the calibrated devices swap
# The batch a user asks for, which the fair baseline keeps (a Deep-Edge headline default,
# docs/deep-edge.md). Source: ours; the paper states no batch for fair, and 32 is Fig. 3's
# reference batch of the calibrated profiles (perf.calibrated_constants.REFERENCE_BATCH).
USER_BATCH = 32


@dataclass(frozen=True, slots=True)
class AppLimit:
    """A background app on a worker: its deadline (ms) and the pressure threshold δ^a the
    planner enforces on its predicted execution time (the deadline, or less to leave a
    margin for the models' error)."""

    name: str
    kind: str
    threshold_ms: float
    deadline_ms: float | None = None

    @property
    def deadline(self) -> float:
        return self.threshold_ms if self.deadline_ms is None else self.deadline_ms


@dataclass(frozen=True, slots=True)
class WorkerState:
    """A candidate worker: its device, device type and state X_i = (cpu, gpu, mem) in %."""

    device: str
    device_type: str
    state: tuple[float, float, float]
    apps: tuple[AppLimit, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateProblem:
    """Inputs of Algorithm 1: workers' states, the server's state X_ps, |M| samples, the batch
    bounds of constraint (2), the stopping threshold ε and the iteration cap τ, and one
    performance model per device type (learned, or calibrated ground truth)."""

    workers: tuple[WorkerState, ...]
    ps_state: tuple[float, float, float]
    n_samples: int
    models: Mapping[str, PerfModel] = field(repr=False)
    b_min: int = 8
    b_max: int = 128  # the largest batch the profiles cover; models do not extrapolate
    epsilon: float = 1.0
    tau: int = 50
    mem_limit_percent: float = MEM_LIMIT_PERCENT
    user_batch: int = USER_BATCH  # the batch a user asks for (the fair baseline keeps it)
    epochs: int = 1
    transfer_s_per_sample: Mapping[str, float] = field(default_factory=dict)
    init_s: Mapping[str, float] = field(default_factory=dict)
    noise_scale: float | None = None
    """The workload's gradient noise scale in samples (Adam-preconditioned for Adam,
    docs/runtime.md), which the ``deep-edge-goodput`` policy weighs batches with; None:
    unknown."""

    def __post_init__(self) -> None:
        if not self.workers:
            raise ConfigError("the problem has no candidate worker", field="workers")
        if self.n_samples < 1:
            raise ConfigError("must be at least 1", field="n_samples")
        if not self.b_min <= self.user_batch <= self.b_max:
            raise ConfigError(f"must be in [b_min, b_max], got {self.user_batch}",
                              field="user_batch")
        if not 1 <= self.b_min <= self.b_max:
            raise ConfigError(f"need 1 <= b_min <= b_max, got {self.b_min}, {self.b_max}",
                              field="b_min")
        missing = sorted({w.device_type for w in self.workers} - set(self.models))
        if missing:
            raise ConfigError(f"no performance model for {', '.join(missing)}", field="models")
        names = [w.device for w in self.workers]
        if len(set(names)) != len(names):
            raise ConfigError("worker devices must be unique", field="workers")
        if self.noise_scale is not None and not self.noise_scale > 0:
            raise ConfigError(f"must be above 0 samples, got {self.noise_scale}",
                              field="noise_scale")


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """Shards d_i (integers summing to |M|), batch sizes b_i, and what the policy predicted:
    the epoch time and each background app's execution time (ms) under the plan."""

    shards: Mapping[str, int]
    batch_sizes: Mapping[str, int]
    predicted_epoch_s: float
    predicted_exec_ms: Mapping[str, float]
    policy: str
    iterations: int = 0

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(w for w, d in self.shards.items() if d > 0)
