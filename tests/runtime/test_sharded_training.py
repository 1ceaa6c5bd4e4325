"""The engine with its parameter server cut into shards (``TrainConfig.ps_shards``
``workers``, ``runtime.shards``) on a real local Ray instance: the same steps as one server,
and a shard killed for real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tests.runtime.test_training import (
    TRAIN_IDS,
    _assert_each_sample_once,
    _config,
    _KillServerMidEpoch,
    _quiet,
)

from edgewise.cluster.model import Cluster
from edgewise.runtime.engine import TrainResult, train
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import TrainPlan, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.wire.frames import decode, to_torch

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def runtime(small_cluster: Cluster) -> Iterator[RayRuntime]:
    rt = start_local(small_cluster)
    yield rt
    rt.shutdown()


def _unequal(runtime: RayRuntime) -> TrainPlan:
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    shards = {"nano-0": 700, "nano-1": 500, "nano-2": 237}
    return TrainPlan(shards, plan.batch_sizes, plan.ps_device, plan.store_device)


def _checkpoint(result: TrainResult) -> dict[str, torch.Tensor]:
    assert result.checkpoint is not None
    return dict(to_torch(decode(result.checkpoint.read_bytes())))


def test_a_sharded_server_takes_the_steps_of_one(runtime: RayRuntime, tmp_path: Path) -> None:
    """Two epochs of balanced synchronous steps on unequal shards (bfloat16 on the wire, its
    replies as changes), with one server and with a shard on each worker's device: the same
    accuracies, each sample once, and the same checkpoint bit for bit (the shards' put
    together); the gradient noise scale pooled over the shards is one server's up to the
    order of the float sums."""
    plan = _unequal(runtime)
    runs = {shards: train(runtime, _quiet(mode="sync", epochs=2, ps_shards=shards), plan,
                          checkpoint_dir=tmp_path / shards) for shards in ("one", "workers")}
    one, sharded = runs["one"], runs["workers"]
    _assert_each_sample_once(sharded)
    assert sharded.interruptions == ()
    assert [r.val_accuracy for r in sharded.epochs] == [r.val_accuracy for r in one.epochs]
    for a, b in zip(sharded.epochs, one.epochs, strict=True):
        assert a.noise_scale == pytest.approx(b.noise_scale, rel=1e-4)
    want, got = _checkpoint(one), _checkpoint(sharded)
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    # each worker's port carried its share: a shard on its own device costs no link
    received = {w: t["wire_bytes_received"] for w, t in sharded.transport_bytes.items()}
    assert set(received) == set(plan.workers) and all(b > 0 for b in received.values())


def test_a_killed_shard_is_its_devices_fault_and_loses_no_sample(
        runtime: RayRuntime, tmp_path: Path) -> None:
    """The shard on the last worker device killed in epoch 1: the attempt is interrupted,
    that device (not the server's) is struck, and the job goes on from the last checkpoint
    with every epoch training each sample once."""
    hook = _KillServerMidEpoch({1: "ps-"})  # the last of the run's servers by name: -s2
    plan = _unequal(runtime)
    result = train(runtime, _config(mode="sync", epochs=3, ps_shards="workers"), plan,
                   events=hook, ledger=StrikeLedger(tmp_path / "strikes.json"))
    assert hook.killed[1].endswith("-s2")
    assert [r.epoch for r in result.epochs] == [0, 1, 2]
    _assert_each_sample_once(result)
    first = result.interruptions[0]
    assert (first.device, first.epoch) == (plan.workers[-1], 1), result.interruptions
