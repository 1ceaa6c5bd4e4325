"""Profiling a model slice where it runs (PipeEdge's per-device-type profiler): the wall
seconds one forward pass of a stage takes on a device, as the runtime runs it."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import ray
import torch
from torch import nn

from edgewise.nn.slices import SliceWeights, load_slice
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["time_slice"]


@ray.remote(max_retries=0)
def _time_slice(skeleton: nn.Module, ref: SliceWeights, x: np.ndarray[Any, Any],
                stretch: float, repeats: int) -> float:
    torch.set_num_threads(1)  # as a stage actor runs
    module, inputs = load_slice(skeleton, ref), torch.from_numpy(x)
    with torch.inference_mode():
        module(inputs)  # warm-up: allocations, lazy initialisation
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            with emulated_compute(stretch):
                module(inputs)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def time_slice(runtime: RayRuntime, device: str, skeleton: nn.Module, ref: SliceWeights,
               x: np.ndarray[Any, Any], memory_mb: int, repeats: int = 2) -> float:
    """Median wall seconds of ``repeats`` forward passes of the slice on ``device`` (after
    one warm-up), under the device's emulated speed where it is emulated."""
    resources = runtime.actor_options(device, memory_mb)["resources"]
    task = _time_slice.options(num_cpus=0, resources=resources)
    return float(ray.get(task.remote(skeleton, ref, x, runtime.stretch.get(device, 1.0),
                                     repeats)))
