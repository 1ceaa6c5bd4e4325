"""The constants Deep-Edge's headline turns on, each with its source (docs/deep-edge.md lists
them; a test pins the two together).

The paper states none of them exactly (issue 18): SIFT's base time and load weights and the
CPU slow-down k_c are our estimates, the GPU slope k_g is anchored on Fig. 4, and fair's
batch is our choice. They were fixed, with these sources, before any sensitivity sweep ran;
``edgewise bench deep-edge --sweep`` varies copies of the calibrated models and never moves
a default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from edgewise.perf import calibrated_constants as K
from edgewise.update.problem import USER_BATCH

__all__ = ["DEFAULTS", "SOURCES", "HeadlineDefaults", "default_rows"]


@dataclass(frozen=True, slots=True)
class HeadlineDefaults:
    """The values the plain ``edgewise bench deep-edge`` runs with (sources in ``SOURCES``);
    read from where the code keeps them (``perf.calibrated_constants``, ``update.problem``)."""

    sift_base_ms_nano: float = K.SIFT_BASE_MS["jetson-nano"]
    sift_base_ms_tx2: float = K.SIFT_BASE_MS["jetson-tx2"]
    sift_cpu_weight: float = K.SIFT_CPU_WEIGHT
    sift_gpu_weight: float = K.SIFT_GPU_WEIGHT
    cpu_slowdown: float = K.CPU_SLOWDOWN_GPU_DEVICE
    gpu_slowdown: float = K.GPU_SLOWDOWN
    fair_batch: int = USER_BATCH


DEFAULTS = HeadlineDefaults()

SOURCES: dict[str, str] = {
    "sift_base_ms_nano": "ours (estimate): SIFT on a 640x320 frame, serialised and sent over "
                         "UDP, on an idle Nano; the paper states only the 200 ms period (§V-A)",
    "sift_base_ms_tx2": "ours (estimate): the Nano's time scaled by the CPU clocks (1.43 vs "
                        "2.0 GHz)",
    "sift_cpu_weight": "ours (estimate): SIFT meets its deadline beside training on an idle "
                       "Jetson and misses it under heavy training and stress (§V-A needs both)",
    "sift_gpu_weight": "ours (estimate): on unified memory a busy GPU takes DRAM bandwidth "
                       "from SIFT; half the CPU weight",
    "cpu_slowdown": "ours (estimate): Fig. 9(b) gives the direction only; +10% compute at a "
                    "full CPU stressor on a Jetson",
    "gpu_slowdown": "paper Fig. 4: initial GPU loads of 66% and 88% add \"almost 20%\" to the "
                    "step; linear through their midpoint, 0.20 / 0.77",
    "fair_batch": "ours: the paper states no batch for fair; Fig. 3's reference batch of the "
                  "calibrated profiles",
}


def default_rows() -> list[tuple[str, Any, str]]:
    """(name, value, source) for every default, in declaration order (the docs table)."""
    return [(f.name, getattr(DEFAULTS, f.name), SOURCES[f.name])
            for f in fields(HeadlineDefaults)]
