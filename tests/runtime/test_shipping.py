"""An epoch's checkpoint fetched while the next epoch trains (``runtime.shipping``): a landed
one is saved, one lost with its server takes its epoch along, and a server killed as its
checkpoint leaves loses no sample and no epoch."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray.exceptions import RayActorError

from edgewise.cluster.model import Cluster
from edgewise.nn.data import digits_split
from edgewise.runtime.engine import EpochRecord, _Job, latest_checkpoint, train
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.runtime.shipping import Landed, Shipment
from edgewise.wire.frames import encode

TRAIN_IDS = np.sort(digits_split()[0].ids)


def _record(epoch: int) -> EpochRecord:
    return EpochRecord(epoch, 0.5, 1.0, 10.0, ("a",), np.arange(3))


def _job(tmp_path: Path, events: list[tuple[str, dict[str, Any]]]) -> _Job:
    return _Job(None, TrainConfig(epochs=3), StrikeLedger(),  # type: ignore[arg-type]
                lambda kind, data: events.append((kind, data)), tmp_path)


def _shipment(epoch: int, landed: Landed | None) -> Shipment:
    fetched: Future[Landed] = Future()
    if landed is None:
        fetched.set_exception(RayActorError())
    else:
        fetched.set_result(landed)
    return Shipment(epoch, None, fetched)


def test_a_landed_checkpoint_is_kept_and_announced(tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    job = _job(tmp_path, events)
    job.records = [_record(0), _record(1)]
    frame = encode({"w": np.zeros(3, np.float32)}, meta={"epoch": 1})
    job.shipment = _shipment(1, (frame, tmp_path / "epoch-0001.ewt"))
    job._land(None)
    assert job.checkpoint == frame and job.shipment is None
    assert job.checkpoint_path == tmp_path / "epoch-0001.ewt"
    assert [r.epoch for r in job.records] == [0, 1]
    assert events == [("checkpoint", {"epoch": 1, "path": tmp_path / "epoch-0001.ewt"})]


def test_a_checkpoint_lost_with_its_server_takes_its_epoch_along(tmp_path: Path) -> None:
    """The epoch whose checkpoint never left the server is dropped (the next attempt runs
    it again from the checkpoint before), and a target it reached no longer counts."""
    events: list[tuple[str, dict[str, Any]]] = []
    job = _job(tmp_path, events)
    job.records, job.checkpoint = [_record(0), _record(1)], b"epoch 0's"
    job.stopped_early = True
    job.shipment = _shipment(1, None)
    job._land(None)
    assert [r.epoch for r in job.records] == [0] and job.done == 1
    assert job.checkpoint == b"epoch 0's" and not job.stopped_early
    assert events == [("epoch_lost", {"epoch": 1})]
    assert latest_checkpoint(tmp_path) is None


@pytest.fixture(scope="module")
def runtime(small_cluster: Cluster) -> Iterator[RayRuntime]:
    rt = start_local(small_cluster)
    yield rt
    rt.shutdown()


class _KillServerAtEpochEnd:
    """Kills the job's parameter server as epoch ``epoch`` ends: its checkpoint has just
    been asked for, and may or may not have left the server."""

    def __init__(self, epoch: int) -> None:
        self.epoch, self.killed = epoch, False
        self.kinds: list[tuple[str, Any]] = []

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.kinds.append((kind, data.get("epoch")))
        if kind == "epoch_end" and data["epoch"] == self.epoch and not self.killed:
            [name] = FaultInjector.actors("ps-")[-1:]
            FaultInjector().kill(name)
            self.killed = True


@pytest.mark.ray
@pytest.mark.slow
def test_a_server_killed_as_its_checkpoint_leaves_loses_no_epoch(
        runtime: RayRuntime, tmp_path: Path) -> None:
    """Whether the checkpoint of epoch 1 got out or not, the job ends with epochs 0, 1, 2,
    each training every sample once, the server's device struck; an epoch whose
    checkpoint was lost ran again, and every epoch that counts has its checkpoint."""
    hook = _KillServerAtEpochEnd(1)
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    result = train(runtime, TrainConfig(epochs=3, heartbeat_s=0.5, mode="sync",
                                        ps_shards="one"), plan,
                   events=hook, ledger=StrikeLedger(tmp_path / "strikes.json"),
                   checkpoint_dir=tmp_path / "checkpoints")
    assert hook.killed
    assert [r.epoch for r in result.epochs] == [0, 1, 2]
    for record in result.epochs:
        assert np.array_equal(np.sort(record.applied_ids), TRAIN_IDS), record.epoch
    assert [i.device for i in result.interruptions][:1] == [plan.ps_device]
    ends = [e for k, e in hook.kinds if k == "epoch_end"]
    lost = [e for k, e in hook.kinds if k == "epoch_lost"]
    assert lost in ([], [1])
    assert ends.count(1) == 1 + len(lost)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.ewt")) == [
        "epoch-0000.ewt", "epoch-0001.ewt", "epoch-0002.ewt"]
