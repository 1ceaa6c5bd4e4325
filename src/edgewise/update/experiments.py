"""Random experiments of Deep-Edge §V-C on the paper's testbed, and large random clusters
for solver timing."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgewise.perf.calibrated_constants import SIFT_PERIOD_MS
from edgewise.perf.schema import PerfModel
from edgewise.update.problem import AppLimit, UpdateProblem, WorkerState

__all__ = ["PAPER_SAMPLES", "TESTBED_WORKERS", "random_cluster_problem", "testbed_problem"]

PAPER_SAMPLES = 3855  # Caltech-256 samples of the paper's model update (§V-A)
TESTBED_WORKERS = (("tx2-0", "jetson-tx2"), ("nano-0", "jetson-nano"),
                   ("nano-1", "jetson-nano"), ("nano-2", "jetson-nano"))

# The state a worker shows with SIFT running and no stressor (%, cpu/gpu/mem), and the
# stress-ng / CUDA stress levels an experiment draws from (added utilisation, %).
SIFT_BASE_STATE = (15.0, 0.0, 25.0)
CPU_STRESS = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0)
GPU_STRESS = (0.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0)
MEM_STRESS = (0.0, 5.0, 10.0, 20.0, 30.0)
PS_CPU_STRESS = (0.0, 20.0, 40.0, 60.0)


def _stressed(rng: np.random.Generator) -> tuple[float, float, float]:
    base = SIFT_BASE_STATE
    return (base[0] + float(rng.choice(CPU_STRESS)), base[1] + float(rng.choice(GPU_STRESS)),
            base[2] + float(rng.choice(MEM_STRESS)))


def _stressed_worker(name: str, dtype: str, truth: Mapping[str, PerfModel],
            rng: np.random.Generator, margin: float = 0.0) -> WorkerState:
    """A worker with SIFT plus random stressors such that SIFT still meets its deadline at
    the initial state (§V-C: "the initial state of every node does not violate the
    deadline"); redraws until it does."""
    app = AppLimit(f"sift-{name}", "sift", SIFT_PERIOD_MS / (1 + margin), SIFT_PERIOD_MS)
    for _ in range(1000):
        state = _stressed(rng)
        ms = float(truth[dtype].exec_time("sift", np.array([state]))[0])
        if ms <= SIFT_PERIOD_MS:
            return WorkerState(name, dtype, state, (app,))
    raise RuntimeError(f"no stress point keeps SIFT within its deadline on {dtype}")


def testbed_problem(rng: np.random.Generator, models: Mapping[str, PerfModel],
                    truth: Mapping[str, PerfModel],
                    margins: Mapping[str, float] | None = None) -> UpdateProblem:
    """One §V-C experiment: 1 TX2 + 3 Nano workers, each with SIFT and random stressors;
    a Raspberry Pi 4 parameter server with a random CPU stress. ``margins`` (per device
    type) lowers δ to deadline / (1 + margin) to absorb the models' relative error."""
    margins = margins or {}
    workers = tuple(_stressed_worker(n, t, truth, rng, margins.get(t, 0.0))
                    for n, t in TESTBED_WORKERS)
    ps = (10.0 + float(rng.choice(PS_CPU_STRESS)), 0.0, 30.0)
    return UpdateProblem(workers, ps, PAPER_SAMPLES, models)


def random_cluster_problem(n_devices: int, rng: np.random.Generator,
                           models: Mapping[str, PerfModel],
                           truth: Mapping[str, PerfModel]) -> UpdateProblem:
    """``n_devices`` TX2 and Nano workers (1:3) with random stress, for solver timing."""
    types = rng.choice(["jetson-tx2", "jetson-nano", "jetson-nano", "jetson-nano"], n_devices)
    workers = tuple(_stressed_worker(f"d{i:04d}", str(t), truth, rng) for i, t in enumerate(types))
    ps = (10.0 + float(rng.choice(PS_CPU_STRESS)), 0.0, 30.0)
    return UpdateProblem(workers, ps, PAPER_SAMPLES * max(1, n_devices // 4), models)
