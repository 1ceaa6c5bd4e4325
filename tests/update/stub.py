"""A small analytic performance model with the Fig. 9 trends, for fast oracle tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@dataclass(frozen=True)
class StubModel:
    device_type: str
    speed: float = 1.0          # relative speed
    mem_per_sample: float = 0.6  # % memory per sample of batch
    sift_ms: float = 100.0

    def compute_time(self, state: Array, batch: Array) -> Array:
        load = 1 + 0.3 * state[:, 1] / 100 + 0.15 * state[:, 0] / 100
        return (0.02 + 0.5 / batch) * load / self.speed

    def update_time(self, state: Array, batch: Array, batch_mean: Array, ps_cpu: Array,
                    n_workers: Array) -> Array:
        return 0.3 * (1 + ps_cpu / 100) * (1 + 0.25 * (n_workers - 1) * 32 / batch_mean)

    def new_state(self, state: Array, batch: Array) -> Array:
        out = state.copy()
        out[:, 0] = np.minimum(100, state[:, 0] + 20)
        out[:, 1] = np.minimum(100, state[:, 1] + 10 + 0.1 * batch)
        out[:, 2] = state[:, 2] + 10 + self.mem_per_sample * batch
        return out

    def exec_time(self, app_kind: str, new_state: Array) -> Array:
        cpu, gpu = new_state[:, 0] / 100, new_state[:, 1] / 100
        return self.sift_ms * (1 + cpu**3 + 0.5 * gpu**2)
