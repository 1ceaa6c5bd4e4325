"""Profiling a model slice where it runs (PipeEdge's per-device-type profiler): the wall
seconds one forward pass of a stage takes on a device, as the runtime runs it.

The passes are repeated for at least :data:`MIN_SECONDS` of wall time and their mean taken:
what a stage sustains, which is what a pipeline's steady state runs at. On a testbed a
device is a CFS quota (``testbed.plan.cfs_period_us``: periods of up to a second), and a
pass of a few milliseconds either runs at the host's full speed on quota left in its period
or waits out the rest of the period: a median of two such passes read the same Raspberry Pi
4 node as 0.5 and 16 requests/s of ViT-Large's medium sibling on two runs (2026-12-02),
where it served 0.87 and 1.09."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray
import torch
from torch import nn

from edgewise.nn.slices import SliceWeights, load_slice
from edgewise.runtime.emulation import emulated_compute
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["MIN_SECONDS", "time_slice"]

MIN_SECONDS = 2.0
"""Least wall time the timed passes span: two of a testbed's longest CFS periods (1 s)."""


@ray.remote(max_retries=0)
def _time_slice(skeleton: nn.Module, ref: SliceWeights, x: np.ndarray[Any, Any],
                stretch: float, repeats: int, min_seconds: float) -> float:
    torch.set_num_threads(1)  # as a stage actor runs
    module, inputs = load_slice(skeleton, ref), torch.from_numpy(x)
    with torch.inference_mode():
        module(inputs)  # warm-up: allocations, lazy initialisation
        passes, started = 0, time.perf_counter()
        while passes < repeats or time.perf_counter() - started < min_seconds:
            with emulated_compute(stretch):
                module(inputs)
            passes += 1
    return (time.perf_counter() - started) / passes


def time_slice(runtime: RayRuntime, device: str, skeleton: nn.Module, ref: SliceWeights,
               x: np.ndarray[Any, Any], memory_mb: int, repeats: int = 2,
               min_seconds: float = MIN_SECONDS) -> float:
    """Mean wall seconds of a forward pass of the slice on ``device`` (after one warm-up),
    over at least ``repeats`` passes and ``min_seconds`` of wall time, under the device's
    emulated speed where it is emulated."""
    resources = runtime.actor_options(device, memory_mb)["resources"]
    task = _time_slice.options(num_cpus=0, resources=resources)
    return float(ray.get(task.remote(skeleton, ref, x, runtime.stretch.get(device, 1.0),
                                     repeats, min_seconds)))
