"""Where a parameter-server run's time went (``runtime.bench.where_time_went``), from
hand-made epoch records: the server's busy share of each epoch, and the workers' seconds per
batch computing, encoding, waiting and loading (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.bench import where_time_went
from edgewise.runtime.engine import EpochRecord, TrainResult
from edgewise.runtime.plan import equal_plan


def _stats(wall: float, compute_per_sample: float, wait: float) -> dict[str, float]:
    return {"samples": 320.0, "steps": 10.0, "wall_seconds": wall,
            "compute_seconds_per_sample": compute_per_sample, "encode_seconds_per_batch": 0.01,
            "wait_seconds_per_batch": wait, "load_seconds_per_batch": 0.02,
            "update_seconds_per_batch": 0.01 + wait + 0.02}


def _record(epoch: int, server_s: float, waits: tuple[float, float]) -> EpochRecord:
    stats = {"a": _stats(4.0, 0.001, waits[0]), "b": _stats(5.0, 0.002, waits[1])}
    return EpochRecord(epoch, 0.5, 5.0, 128.0, ("a", "b"), np.arange(3), stats,
                       server_seconds=server_s, device_seconds=5.0)


def _result(*records: EpochRecord) -> TrainResult:
    plan = equal_plan(load_cluster(example_path("three-nanos.yaml")), 640)
    return TrainResult("j", records, (), plan, {}, {}, {}, None, 15.0)


def test_the_first_epoch_is_left_out_and_medians_over_epochs_are_taken() -> None:
    found = where_time_went(_result(_record(0, 5.0, (9.0, 9.0)),   # warm-up: ignored
                                    _record(1, 1.0, (0.1, 0.3)),
                                    _record(2, 2.0, (0.3, 0.5)),
                                    _record(3, 4.0, (0.2, 0.4))))
    # busy: server seconds over the slowest worker's loop (5 s): 0.2, 0.4, 0.8 -> median 0.4
    assert found["ps_server_busy_fraction"] == pytest.approx(0.4)
    per_batch = found["worker_seconds_per_batch"]
    # compute per batch: 0.001 and 0.002 s/sample x 32 samples a batch; mean over workers
    assert per_batch["compute"] == pytest.approx((0.032 + 0.064) / 2)
    # wait: each worker's median over epochs 1-3 (0.2 and 0.4), then their mean
    assert per_batch["wait"] == pytest.approx(0.3)
    assert per_batch["encode"] == pytest.approx(0.01)
    assert per_batch["load"] == pytest.approx(0.02)


def test_a_single_epoch_run_is_its_own_steady_state() -> None:
    found = where_time_went(_result(_record(0, 2.5, (0.1, 0.1))))
    assert found["ps_server_busy_fraction"] == pytest.approx(0.5)


def test_the_races_step_parts_are_these_in_device_seconds() -> None:
    """``bench time-to-accuracy`` reports each engine arm's step parts in device seconds:
    the breakdown above divided by the cluster's time dilation."""
    from edgewise.suites.tta_arms import step_parts

    result = _result(_record(0, 5.0, (9.0, 9.0)), _record(1, 1.0, (0.1, 0.3)),
                     _record(2, 2.0, (0.3, 0.5)), _record(3, 4.0, (0.2, 0.4)))
    parts = step_parts(result, 4.0)
    assert parts == pytest.approx({"compute": 0.048 / 4, "encode": 0.01 / 4, "wait": 0.3 / 4,
                                   "load": 0.02 / 4})
