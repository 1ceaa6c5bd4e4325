"""The profile schema shared by the profiler, the calibrated generator and the learned models,
and the performance-model interface the Deep-Edge solver calls (§IV-C1, Eq. 5–8)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "COLUMNS", "COMPUTE_FEATURES", "EXEC_FEATURES", "PROFILE_COLUMNS", "QUALITY_COLUMNS",
    "STATE_COLUMNS", "STATE_FEATURES", "UPDATE_FEATURES", "PerfModel",
]

Array = NDArray[np.float64]

# Node state: utilisation in percent (0–100) of CPU, accelerator and memory.
STATE_COLUMNS = ("cpu", "gpu", "mem")

# One profile sample (one row of a profile CSV/Parquet file).
COLUMNS = (
    "device_type",          # catalog name the sample was measured on (or calibrated for)
    "host",                 # machine that recorded it ("calibrated" for generated profiles)
    "cpu", "gpu", "mem",    # node state before training (%), X_i^initial
    "batch_size",           # b_i
    "n_workers",            # |W|
    "batch_mean",           # mean batch size over all workers (summarises B)
    "ps_cpu", "ps_gpu", "ps_mem",  # parameter-server state (%), X_ps
    "compute_s_per_sample", # t_i^compute, seconds per sample (forward + backward / b)
    "update_s",             # t_i^update = push + update + pull, seconds per batch
    "new_cpu", "new_gpu", "new_mem",  # node state while training, 95th percentile (%)
    "app_kind",             # background app profiled alongside ("sift"), or ""
    "app_exec_ms",          # its execution time per period at the new state (ms)
)

# How well a measured sample is known (perf.stability; issue 24 §6). Written by the profiler
# after COLUMNS since 2026-12-02; a profile recorded before has only COLUMNS (its rows read as
# blank here), calibrated profiles have none, and no learned function reads them.
QUALITY_COLUMNS = (
    "steps",                # timed training steps the sample took
    "step_time_ci95_rel",   # half-width of the 95 % CI of the mean step time ÷ the mean
)
PROFILE_COLUMNS = (*COLUMNS, *QUALITY_COLUMNS)  # what the profiler writes

# Features of each learned function (Deep-Edge §V-B: chosen by its sensitivity analysis).
COMPUTE_FEATURES = ("cpu", "gpu", "batch_size")                      # EstComputeTime
UPDATE_FEATURES = ("cpu", "gpu", "batch_size", "batch_mean", "ps_cpu", "n_workers")  # EstUpdateTime
STATE_FEATURES = ("cpu", "gpu", "mem", "batch_size")                 # EstState (per output)
EXEC_FEATURES = ("new_cpu", "new_gpu", "new_mem")                    # EstExecTime


class PerfModel(Protocol):
    """Performance and interference of one device type, vectorised over rows.

    ``state`` is an (n, 3) array of (cpu, gpu, mem) percent; the others are (n,) arrays.
    Implemented by the calibrated ground truth and by the learned (AutoML) models.
    """

    device_type: str

    def compute_time(self, state: Array, batch: Array) -> Array:
        """EstComputeTime: seconds per sample (Eq. 5)."""
        ...

    def update_time(self, state: Array, batch: Array, batch_mean: Array, ps_cpu: Array,
                    n_workers: Array) -> Array:
        """EstUpdateTime: push + update + pull seconds per batch (Eq. 6)."""
        ...

    def new_state(self, state: Array, batch: Array) -> Array:
        """EstState: the (n, 3) state while training at ``batch`` (Eq. 7), 95th percentile."""
        ...

    def exec_time(self, app_kind: str, new_state: Array) -> Array:
        """EstExecTime: the background app's execution time in ms at ``new_state`` (Eq. 8)."""
        ...
