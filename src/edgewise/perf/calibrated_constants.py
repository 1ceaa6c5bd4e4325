"""Constants of the calibrated device profiles, each anchored on Deep-Edge or justified."""

from __future__ import annotations

import math
from typing import Final

__all__ = [
    "BACKWARD_SHARE", "CPU_SHARE_THETA", "CPU_SLOWDOWN_CPU_DEVICE", "CPU_SLOWDOWN_GPU_DEVICE",
    "GPU_LOAD_REFERENCE_PCT", "GPU_LOAD_STEP_INCREASE", "GPU_SLOWDOWN", "LINK_EFFICIENCY",
    "LINK_LATENCY_MS", "LINK_MBPS", "LOAD_HALF_BATCH", "MAX_PS_UTILISATION",
    "MESSAGE_OVERHEAD_MS", "NANO_STEP_S", "NOISE_SIGMA", "OOM_KILL_PCT", "OS_MEMORY_MB", "PARAM_MB",
    "PS_UPDATE_MS", "REFERENCE_BATCH", "REFERENCE_WORKERS", "SAMPLE_MEMORY_MB", "SIFT_ANCHOR",
    "SIFT_BASE_MS", "SIFT_CPU_WEIGHT", "SIFT_GPU_WEIGHT", "SIFT_PERIOD_MS",
    "SIFT_SPEED_EXPONENT", "SIFT_SWAP_PCT", "SIFT_SWAP_WEIGHT", "STRESS_LEVELS_PCT",
    "TRAIN_LOAD", "TRAIN_MEMORY_MB", "TX2_STEP_S",
]  # fmt: skip

# Constants that differ between devices with an accelerator ("gpu") and CPU-only ones
# ("cpu") are dicts keyed by that class; docs/calibrated-profiles.md justifies each value.

# --- Training step: Fig. 3 (§II-A) and the cost model of §III-A3 -------------------------
NANO_STEP_S: Final = 2.69  # Fig. 3: mean step time of a Jetson Nano (Inception, Caltech-256)
TX2_STEP_S: Final = 1.89  # Fig. 3: the TX2's; reproduced as NANO_STEP_S / catalog speed 1.423
REFERENCE_BATCH: Final = 32  # batch of Fig. 3 (not stated; the middle of a Nano's 8..64)
REFERENCE_WORKERS: Final = 4  # §V-A testbed: one TX2 and three Nanos train, a Pi 4 is the PS
BACKWARD_SHARE: Final = 0.25  # backward_i's share of a step's compute at REFERENCE_BATCH

# --- Interference on compute: Fig. 4 (§II-A), Fig. 9(a)(b) -----------------------------
# Deep-Edge headline defaults (docs/deep-edge.md, "Where the headline holds"): k_g and k_c.
GPU_LOAD_REFERENCE_PCT: Final = 77.0  # midpoint of Fig. 4's initial GPU loads, 66% and 88%
GPU_LOAD_STEP_INCREASE: Final = 0.20  # Fig. 4: "increases the average step time by almost 20%"
# k_g, source: paper Fig. 4 (+20% step time at 66-88% initial GPU load, linear through 77%)
GPU_SLOWDOWN: Final = GPU_LOAD_STEP_INCREASE / (GPU_LOAD_REFERENCE_PCT / 100.0)  # per unit load
# k_c of a Jetson, source: ours (estimate); Fig. 9(b) gives the direction only: +10% compute
# at a full CPU stressor (the CPU feeds the input pipeline and launches kernels)
CPU_SLOWDOWN_GPU_DEVICE: Final = 0.10
CPU_SLOWDOWN_CPU_DEVICE: Final = 1.0  # x2 at a full CPU stressor: CFS gives training half

# --- Update time: Eq. 6, Fig. 9(e)(f), §III-A3 contention --------------------------------
PARAM_MB: Final = (2048 * 257 + 257) * 4 / 1e6  # Inception-v3's last layer for 257 classes
LINK_MBPS: Final = 1000.0  # §IV-A: a layer-2 switch; Gigabit Ethernet on every device
LINK_EFFICIENCY: Final = 0.94  # TCP goodput / line rate on Gigabit Ethernet
LINK_LATENCY_MS: Final = 0.3  # one way through one switch (the cluster files' default)
MESSAGE_OVERHEAD_MS: Final = 5.0  # worker-side serialisation per push or pull (estimate)
PS_UPDATE_MS: Final = 10.0  # SGD on 0.53 M parameters + message handling on a Pi 4 PS
CPU_SHARE_THETA: Final = 0.5  # stretch 1 / (1 - θ u): fair share against a full stressor
MAX_PS_UTILISATION: Final = 0.9  # cap on the PS queue's utilisation ρ (keeps waits finite)

# --- Memory: Fig. 9(d), GetMaxBatchSize (§IV-C2), "insufficient memory kills" (§V-B) -----
OOM_KILL_PCT: Final = 95.0  # above this the OS kills the trainer (the planner stops at 85%)
OS_MEMORY_MB: Final = {"gpu": 1024.0, "cpu": 384.0}  # idle OS: L4T + CUDA / headless Pi OS
TRAIN_MEMORY_MB: Final = {"gpu": 600.0, "cpu": 350.0}  # runtime (+ CUDA context) + model
SAMPLE_MEMORY_MB: Final = 30.0  # per sample in a batch: idle Nano fits 64, idle TX2 128

# --- The training task's own load, 95th percentile: Eq. 7, Fig. 5 ------------------------
# new = u + (100 - u) * (k0 + k1 * b / (b + LOAD_HALF_BATCH)) for u in {cpu, gpu}.
LOAD_HALF_BATCH: Final = 32.0
TRAIN_LOAD: Final = {
    "gpu": {"cpu": (0.20, 0.15), "gpu": (0.60, 0.35)},  # MXNet on a Jetson: GPU-bound
    "cpu": {"cpu": (0.80, 0.15), "gpu": (0.0, 0.0)},  # on a Pi: all cores, no GPU
}

# --- SIFT on a 640x320 frame every 200 ms (§V-A): EstExecTime, Eq. 8 ---------------------
# Deep-Edge headline defaults (docs/deep-edge.md, "Where the headline holds"): SIFT's base
# time and load weights. Source of all of them: ours (estimates); the paper states only the
# period. Bases: SIFT + serialise + UDP send of a 640x320 frame, TX2 : Nano ~ their CPU
# clocks (2.0 vs 1.43 GHz). Weights: SIFT meets its deadline beside training on an idle
# Jetson and misses it under heavy training + stress (§V-A's setting needs both).
SIFT_PERIOD_MS: Final = 200.0  # §V-A: a frame every 200 ms; period = deadline
SIFT_BASE_MS: Final = {"jetson-nano": 95.0, "jetson-tx2": 70.0, "raspberry-pi-4-4gb": 150.0}
SIFT_ANCHOR: Final = {"gpu": "jetson-nano", "cpu": "raspberry-pi-4-4gb"}  # for other types
SIFT_SPEED_EXPONENT: Final = math.log(95.0 / 70.0) / math.log(1.423)  # through Nano and TX2
SIFT_CPU_WEIGHT: Final = 1.2  # exec x (1 + 1.2 (cpu/100)^2 + ...): convex in the load
SIFT_GPU_WEIGHT: Final = 0.6  # unified memory: a busy GPU takes DRAM bandwidth from SIFT
SIFT_SWAP_PCT: Final = 85.0  # above this memory utilisation the device starts swapping
SIFT_SWAP_WEIGHT: Final = 8.0  # x (1 + 8 h^2), h = (mem - 85) / 15: x9 at 100%

# --- Profile noise: multiplicative log-normal σ, within Table I's MAPEs -------------------
# Noise alone costs a perfect model E|e^{σZ} - 1| ≈ σ·sqrt(2/π) ≈ 0.8σ of MAPE, so a column's σ
# is at most (mean over the Nano and TX2 rows of Table I's MAPE for the function that
# predicts it) / 0.8: the paper's models could not have scored below their data's noise.
NOISE_SIGMA: Final = {
    "compute_s_per_sample": 0.03,  # Table I EstComputeTime: 1.7 / 5.9% (bound 4.8%)
    "update_s": 0.05,  # Table I EstUpdateTime: 9.6 / 7.7% (bound 10.8%; network jitter)
    "new_cpu": 0.03,  # Table I EstState^cpu: 5.2 / 6.3% (bound 7.2%)
    "new_gpu": 0.0125,  # Table I EstState^gpu: 1.5 / 0.5% (bound 1.25%)
    "new_mem": 0.015,  # Table I EstState^mem: 1.5 / 0.9% (bound 1.5%)
    "app_exec_ms": 0.02,  # Table I EstExecTime: 1.7 / 1.5% (bound 2.0%)
}
STRESS_LEVELS_PCT: Final = tuple(float(u) for u in range(0, 100, 10))  # a stress-ng grid
