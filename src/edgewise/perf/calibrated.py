"""Calibrated device profiles: ground-truth performance models anchored on Deep-Edge's figures."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from edgewise.cluster.catalog import device_type as catalog_type
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.perf import calibrated_constants as K
from edgewise.perf.schema import COLUMNS, PerfModel

__all__ = ["CALIBRATED_TYPES", "CalibratedDevice", "calibrated", "sample_profile"]

Array = NDArray[np.float64]

# The device types of the Deep-Edge testbed (§V-A); calibrated() serves every catalog type.
CALIBRATED_TYPES = ("jetson-tx2", "jetson-nano", "raspberry-pi-4-4gb")
_LINK_MS = K.PARAM_MB / (K.LINK_MBPS / 8.0 * K.LINK_EFFICIENCY) * 1000.0  # one transfer
_MAX_OTHERS = 5  # sample_profile draws 1..6 workers


def _state(state: ArrayLike) -> Array:
    """``state`` as an (n, 3) float array of (cpu, gpu, mem) percent."""
    return np.asarray(state, dtype=np.float64).reshape(-1, 3)


def _vec(values: ArrayLike) -> Array:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _stretch(load_pct: Array) -> Array:
    """Slowdown of a process sharing its CPU with a stressor: 1 / (1 - θ u), θ = 1/2 so that
    a full stressor halves its share (CFS fair share between two runnable loads)."""
    return 1.0 / (1.0 - K.CPU_SHARE_THETA * np.clip(load_pct, 0.0, 100.0) / 100.0)


def _period_s(step_s: float, batch: Array) -> Array:
    """Idle step time at ``batch`` of a device whose step at REFERENCE_BATCH takes ``step_s``:
    the per-batch share is fixed, the rest scales with the batch (§III-A3)."""
    share = K.BACKWARD_SHARE
    return step_s * (share + (1.0 - share) * batch / K.REFERENCE_BATCH)


@dataclass(frozen=True, slots=True)
class CalibratedDevice(PerfModel):
    """Ground-truth performance and interference of one device type (Deep-Edge Eq. 5–8).

    Parameters
    ----------
    device_type : catalog name.
    step_ref_s : idle step time at REFERENCE_BATCH (Fig. 3: Nano 2.69 s, TX2 1.89 s).
    forward_s, backward_s : per-sample forward and per-batch backward time at idle (§III-A3).
    gpu_slowdown, cpu_slowdown : compute multiplier per unit of GPU / CPU load (Fig. 4, 9(a)(b)).
    memory_mb, os_memory_mb : installed memory and what the idle OS uses.
    train_memory_mb, sample_memory_mb : the trainer's fixed and per-sample memory (Fig. 9(d)).
    cpu_load, gpu_load : (k0, k1) of the training's own load (Eq. 7, Fig. 5).
    sift_base_ms : SIFT execution time at idle (§V-A).
    sift_cpu_weight, sift_gpu_weight : SIFT's slow-down per squared unit of CPU / GPU load.
    """

    device_type: str
    step_ref_s: float
    forward_s: float
    backward_s: float
    gpu_slowdown: float
    cpu_slowdown: float
    memory_mb: float
    os_memory_mb: float
    train_memory_mb: float
    sample_memory_mb: float
    cpu_load: tuple[float, float]
    gpu_load: tuple[float, float]
    sift_base_ms: float
    sift_cpu_weight: float = K.SIFT_CPU_WEIGHT
    sift_gpu_weight: float = K.SIFT_GPU_WEIGHT

    @property
    def has_gpu(self) -> bool:
        """Whether the device trains on an accelerator (its GPU load matters)."""
        return self.gpu_slowdown > 0.0

    def idle_state(self) -> Array:
        """The (1, 3) state of the idle device: no load, only the OS in memory."""
        return np.array([[0.0, 0.0, 100.0 * self.os_memory_mb / self.memory_mb]])

    def compute_time(self, state: Array, batch: Array) -> Array:
        """EstComputeTime (Eq. 5): (forward + backward / b) × (1 + k_g g)(1 + k_c c), seconds
        per sample; memory does not affect it (§V-B)."""
        s, b = _state(state), _vec(batch)
        gpu_slow = 1.0 + self.gpu_slowdown * s[:, 1] / 100.0
        cpu_slow = 1.0 + self.cpu_slowdown * s[:, 0] / 100.0
        return (self.forward_s + self.backward_s / b) * gpu_slow * cpu_slow

    def update_time(self, state: Array, batch: Array, batch_mean: Array, ps_cpu: Array,
                    n_workers: Array) -> Array:
        """EstUpdateTime (Eq. 6): push + update + pull + the wait in the PS queue, seconds.

        Push and pull move the last layer over the switch, stretched by the worker's CPU load;
        the PS update is stretched by the PS's CPU load (Fig. 9(f)); the wait is M/M/1's
        s ρ / (1 - ρ) with ρ = s Σ_j 1 / period_j, so it grows with |W| and shrinks with the
        batch sizes (Fig. 9(e), §III-A3). The other workers are taken to be Nanos.
        """
        s = _state(state)
        message_ms = (K.LINK_LATENCY_MS + _LINK_MS + K.MESSAGE_OVERHEAD_MS) * _stretch(s[:, 0])
        update_ms = K.PS_UPDATE_MS * _stretch(_vec(ps_cpu))
        service_ms = 2.0 * _LINK_MS + update_ms  # the PS's link carries push and pull
        others = np.maximum(_vec(n_workers) - 1.0, 0.0)
        rate = (1.0 / _period_s(self.step_ref_s, _vec(batch))
                + others / _period_s(K.NANO_STEP_S, _vec(batch_mean)))
        rho = np.minimum(service_ms / 1000.0 * rate, K.MAX_PS_UTILISATION)
        return (2.0 * message_ms + update_ms + service_ms * rho / (1.0 - rho)) / 1000.0

    def new_state(self, state: Array, batch: Array) -> Array:
        """EstState (Eq. 7): the (n, 3) state while training, 95th percentile. CPU and GPU
        take a share of the headroom that grows with the batch; memory grows linearly with
        the batch (Fig. 9(d)) and may exceed OOM_KILL_PCT, where the OS kills the trainer."""
        s, b = _state(state), _vec(batch)
        phi = b / (b + K.LOAD_HALF_BATCH)
        cpu = s[:, 0] + (100.0 - s[:, 0]) * (self.cpu_load[0] + self.cpu_load[1] * phi)
        gpu = s[:, 1] + (100.0 - s[:, 1]) * (self.gpu_load[0] + self.gpu_load[1] * phi)
        mem = s[:, 2] + 100.0 * (self.train_memory_mb + self.sample_memory_mb * b) / self.memory_mb
        return np.stack(np.broadcast_arrays(cpu, gpu, mem), axis=1)

    def exec_time(self, app_kind: str, new_state: Array) -> Array:
        """EstExecTime (Eq. 8) of SIFT, ms: base × (1 + w_c c² + w_g g²) × (1 + w_s h²), with
        h = (mem - 85) / 15 above 85% memory (swapping), else 0."""
        if app_kind != "sift":
            raise ConfigError(f"no calibrated model for app kind {app_kind!r} (known: sift)",
                              field="app_kind")
        s = _state(new_state)
        cpu, gpu = np.clip(s[:, 0], 0.0, None) / 100.0, np.clip(s[:, 1], 0.0, None) / 100.0
        load = 1.0 + self.sift_cpu_weight * cpu**2 + self.sift_gpu_weight * gpu**2
        h = np.maximum(s[:, 2] - K.SIFT_SWAP_PCT, 0.0) / (100.0 - K.SIFT_SWAP_PCT)
        return self.sift_base_ms * load * (1.0 + K.SIFT_SWAP_WEIGHT * h**2)

    def step_time(self, state: Array, batch: Array, batch_mean: Array | None = None,
                  ps_cpu: Array | None = None, n_workers: Array | None = None) -> Array:
        """One training step, b t^compute + t^update (§III-A3), seconds; defaults: the
        reference configuration of Fig. 3 (batch_mean = batch, idle PS, REFERENCE_WORKERS)."""
        b = _vec(batch)
        mean = b if batch_mean is None else _vec(batch_mean)
        ps = np.zeros(1) if ps_cpu is None else _vec(ps_cpu)
        n = np.array([float(K.REFERENCE_WORKERS)]) if n_workers is None else _vec(n_workers)
        return b * self.compute_time(state, b) + self.update_time(state, b, mean, ps, n)

    def max_batch_size(self, state: Array, b_min: int = 8, b_max: int = 256,
                       mem_limit_pct: float = K.OOM_KILL_PCT) -> NDArray[np.int64]:
        """GetMaxBatchSize (§IV-C2): the largest power of two in [b_min, b_max] whose memory
        while training stays within ``mem_limit_pct``; 0 where none fits."""
        s = _state(state)
        out = np.zeros(len(s), dtype=np.int64)
        for e in range(int(np.ceil(np.log2(b_min))), int(np.floor(np.log2(b_max))) + 1):
            fits = self.new_state(s, np.full(len(s), 2.0**e))[:, 2] <= mem_limit_pct
            out[fits] = 2**e  # memory grows with the batch, so the last fit is the largest
        return out


def _sift_base_ms(name: str, kind: str, speed: float) -> float:
    """SIFT at idle: the estimate for the testbed's types, else a power law in the catalog
    speed from the class's anchor (Nano for accelerators, Pi 4 for CPU-only)."""
    if name in K.SIFT_BASE_MS:
        return K.SIFT_BASE_MS[name]
    anchor = K.SIFT_ANCHOR[kind]
    ratio = catalog_type(anchor).speed / speed
    return float(K.SIFT_BASE_MS[anchor] * ratio**K.SIFT_SPEED_EXPONENT)


@cache
def calibrated(device_type: str) -> CalibratedDevice:
    """The calibrated model of a catalog device type.

    The idle step at REFERENCE_BATCH takes NANO_STEP_S / speed (Fig. 3 for the Nano and the
    TX2, the catalog's speed law for the rest); the update time at the reference configuration
    is subtracted and the remaining compute split BACKWARD_SHARE per batch, the rest per sample.

    Parameters
    ----------
    device_type : a name in ``edgewise.cluster.catalog()``.

    Returns
    -------
    CalibratedDevice
        Cached: the same object for the same name.

    Raises
    ------
    KeyError
        Unknown device type; the message lists the known ones.
    """
    dt = catalog_type(device_type)
    kind = "cpu" if dt.accelerator == "none" else "gpu"
    base = CalibratedDevice(
        device_type=dt.name, step_ref_s=K.NANO_STEP_S / dt.speed, forward_s=0.0, backward_s=0.0,
        gpu_slowdown=K.GPU_SLOWDOWN if kind == "gpu" else 0.0,
        cpu_slowdown=K.CPU_SLOWDOWN_GPU_DEVICE if kind == "gpu" else K.CPU_SLOWDOWN_CPU_DEVICE,
        memory_mb=float(dt.memory_mb), os_memory_mb=K.OS_MEMORY_MB[kind],
        train_memory_mb=K.TRAIN_MEMORY_MB[kind], sample_memory_mb=K.SAMPLE_MEMORY_MB,
        cpu_load=K.TRAIN_LOAD[kind]["cpu"], gpu_load=K.TRAIN_LOAD[kind]["gpu"],
        sift_base_ms=_sift_base_ms(dt.name, kind, dt.speed),
    )
    ref = np.array([float(K.REFERENCE_BATCH)])
    update_s = float(base.update_time(base.idle_state(), ref, ref, np.zeros(1),
                                      np.array([float(K.REFERENCE_WORKERS)]))[0])
    compute_s = base.step_ref_s - update_s
    return replace(base, backward_s=K.BACKWARD_SHARE * compute_s,
                   forward_s=(1.0 - K.BACKWARD_SHARE) * compute_s / K.REFERENCE_BATCH)


def _draw_states(model: CalibratedDevice, n: int, rng: np.random.Generator) -> Array:
    """Initial (cpu, gpu, mem) on the stress grid: memory stress on top of the idle OS,
    only where the smallest batch (8) still fits (§V-B: else the trainer is killed)."""
    levels = np.asarray(K.STRESS_LEVELS_PCT)
    idle_mem = float(model.idle_state()[0, 2])
    room = model.new_state(np.array([[0.0, 0.0, idle_mem]]), np.array([8.0]))[0, 2]
    mem_levels = levels[idle_mem + levels + (room - idle_mem) <= K.OOM_KILL_PCT]
    if mem_levels.size == 0:
        raise InfeasibleError(f"{model.device_type}: a batch of 8 does not fit in memory")
    cpu = rng.choice(levels, n)
    gpu = rng.choice(levels, n) if model.has_gpu else np.zeros(n)
    return np.column_stack([cpu, gpu, idle_mem + rng.choice(mem_levels, n)])


def _draw_batches(model: CalibratedDevice, state: Array,
                  rng: np.random.Generator) -> tuple[Array, Array, Array]:
    """Batch (a power of two from 8 up to what fits), |W| in 1..6, and the mean batch over
    this worker and |W| - 1 others drawn from 8..256."""
    n = len(state)
    top = np.log2(model.max_batch_size(state)).astype(np.int64)
    batch = np.exp2(rng.integers(3, top + 1)).astype(np.float64)
    workers = rng.integers(1, _MAX_OTHERS + 2, size=n).astype(np.float64)
    others = np.exp2(rng.integers(3, 9, size=(n, _MAX_OTHERS))).astype(np.float64)
    mask = np.arange(_MAX_OTHERS)[None, :] < (workers - 1.0)[:, None]
    mean: Array = (batch + (others * mask).sum(axis=1)) / workers
    return batch, workers, mean


def _noisy(values: Array, column: str, rng: np.random.Generator) -> Array:
    """Multiplicative log-normal measurement noise with the column's σ (NOISE_SIGMA)."""
    return values * np.exp(K.NOISE_SIGMA[column] * rng.standard_normal(len(values)))


def _measured(model: CalibratedDevice, state: Array, inputs: tuple[Array, Array, Array, Array],
              rng: np.random.Generator) -> dict[str, Array]:
    """The measured columns of profile rows: the model's values with measurement noise,
    utilisations capped at 100%."""
    batch, mean, ps_cpu, workers = inputs
    new = model.new_state(state, batch)
    measured = {
        "compute_s_per_sample": model.compute_time(state, batch),
        "update_s": model.update_time(state, batch, mean, ps_cpu, workers),
        "new_cpu": new[:, 0], "new_gpu": new[:, 1], "new_mem": new[:, 2],
        "app_exec_ms": model.exec_time("sift", new),
    }
    noisy = {k: _noisy(v, k, rng) for k, v in measured.items()}
    for k in ("new_cpu", "new_gpu", "new_mem"):
        noisy[k] = np.minimum(noisy[k], 100.0)
    return noisy


def sample_profile(device_type: str, n_samples: int, rng: np.random.Generator, *,
                   model: CalibratedDevice | None = None) -> pd.DataFrame:
    """A noisy profile of ``n_samples`` rows in the schema's COLUMNS, as if measured on
    ``device_type`` over a stress grid with SIFT alongside (the profiler of §IV-B1).

    States come from STRESS_LEVELS_PCT (memory stress on top of the idle OS, only where a
    batch of 8 fits), batches are powers of two from 8 to GetMaxBatchSize, |W| is 1..6, the
    parameter server is a Pi 4 (no GPU) under CPU and memory stress. The measured columns get
    multiplicative log-normal noise with NOISE_SIGMA; utilisations are capped at 100%.

    Parameters
    ----------
    device_type : a catalog name.
    n_samples : rows to draw (0 gives an empty frame with the columns).
    rng : the only source of randomness; the same generator state gives the same frame.
    model : the ground truth to sample (default ``calibrated(device_type)``), e.g. a copy
        with other constants for a sensitivity study; it must be of ``device_type``.

    Returns
    -------
    pandas.DataFrame
        Exactly ``schema.COLUMNS``; host "calibrated", app_kind "sift".

    Raises
    ------
    ConfigError
        ``n_samples`` is negative, or ``model`` is of another device type.
    InfeasibleError
        Not even a batch of 8 fits in the device's memory.
    """
    if n_samples < 0:
        raise ConfigError(f"must be >= 0, got {n_samples}", field="n_samples")
    model = model or calibrated(device_type)
    if model.device_type != device_type:
        raise ConfigError(f"a model of {model.device_type}, not {device_type}", field="model")
    state = _draw_states(model, n_samples, rng)
    batch, workers, mean = _draw_batches(model, state, rng)
    levels = np.asarray(K.STRESS_LEVELS_PCT)
    ps_cpu = rng.choice(levels, n_samples)
    ps_idle = calibrated("raspberry-pi-4-4gb").idle_state()[0, 2]
    ps_mem = ps_idle + rng.choice(levels[levels <= 80.0], n_samples)
    noisy = _measured(model, state, (batch, mean, ps_cpu, workers), rng)
    frame = pd.DataFrame({
        "device_type": model.device_type, "host": "calibrated",
        "cpu": state[:, 0], "gpu": state[:, 1], "mem": state[:, 2],
        "batch_size": batch.astype(np.int64), "n_workers": workers.astype(np.int64),
        "batch_mean": mean, "ps_cpu": ps_cpu, "ps_gpu": np.zeros(n_samples), "ps_mem": ps_mem,
        "app_kind": "sift", **noisy,
    }, index=pd.RangeIndex(n_samples))
    return frame.loc[:, list(COLUMNS)]
