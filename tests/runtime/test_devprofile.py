"""Profiling a device where it is, on a real local Ray instance: the measured worker pushes
to a real parameter server while companion workers on other devices train at the measured
batch, so each row's ``batch_mean`` is its own batch and ``n_workers`` counts them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.needs import require_tool

from edgewise.cluster.model import Cluster
from edgewise.perf.profiler import ProfileConfig
from edgewise.perf.stress import StressPoint
from edgewise.runtime.devprofile import profile_device
from edgewise.runtime.ray_cluster import start_local

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_companions_train_at_the_measured_batch(small_cluster: Cluster, tmp_path: Path) -> None:
    require_tool("stress-ng", "make system-deps, or apt-get install stress-ng")
    # two memory levels: the Latin square gives the first one worker, the second two
    grid = (StressPoint(0, 0, 0), StressPoint(0, 64, 0))
    config = ProfileConfig(grid, batch_sizes=(8, 32), step_s=0.3, settle_s=0.2, app_kind="",
                           device_type="jetson-nano")
    runtime = start_local(small_cluster)
    try:
        result = profile_device(runtime, "nano-0", tmp_path / "nano.csv", config,
                                n_workers_levels=(1, 2))
    finally:
        runtime.shutdown()
    rows = pd.read_csv(result.path)
    assert len(rows) == 4 and result.written == 4
    assert sorted(rows["n_workers"]) == [1, 1, 2, 2]
    assert (rows["batch_mean"] == rows["batch_size"]).all()
    assert (rows["update_s"] > 0).all() and (rows["compute_s_per_sample"] > 0).all()
