"""The asynchronous server's staleness treatment on a small problem: sixteen workers, each
gradient about fifteen updates old, one epoch in simulated time (``runtime.stalesim``: the
server's own code, deterministic for a seed, no Ray)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgewise.nn.workload import Workload, workload_from_dict
from edgewise.runtime.plan import DEFAULT_STALENESS
from edgewise.runtime.staleness import Treatment
from edgewise.runtime.stalesim import SimWorker, simulate_async

MODEL = '''from torch import nn
def make(classes: int = 4, width: int = 32, inputs: int = 16) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, width), nn.BatchNorm1d(width), nn.ReLU(),
                         nn.Linear(width, classes))
'''


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """Four Gaussian blobs in 16 dimensions (640 samples, 512 to train) and an MLP with
    BatchNorm."""
    root: Path = tmp_path_factory.mktemp("blobs")
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 1, (4, 16))
    y = rng.integers(0, 4, 640)
    x = (centers[y] + rng.normal(0, 1.0, (640, 16))).astype(np.float32)
    np.savez(root / "d.npz", x=x, y=y)
    (root / "mlp.py").write_text(MODEL)
    return workload_from_dict({"model": f"py:{root / 'mlp.py'}:make",
                               "data": f"npz:{root / 'd.npz'}",
                               "task": {"input_shape": [16], "classes": 4}})


WORKERS = [SimWorker(f"w{i}", 32, 8, 1.0 + 0.01 * i) for i in range(16)]


def test_the_treated_async_loop_reaches_an_accuracy_the_untreated_one_does_not(
        blobs: Workload) -> None:
    untreated = simulate_async(blobs, WORKERS, Treatment("none"), 1, 0.05, seed=0,
                               schedule="constant")
    treated = simulate_async(blobs, WORKERS, Treatment(DEFAULT_STALENESS), 1, 0.05, seed=0,
                             schedule="constant")
    assert untreated.staleness_mean == treated.staleness_mean  # the same order of pushes
    assert treated.staleness_mean[0] > 10
    assert treated.accuracies[0] >= 0.9
    assert untreated.accuracies[0] < 0.85
