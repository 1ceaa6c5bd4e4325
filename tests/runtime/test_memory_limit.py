"""A device's memory: a plan that reserves more of it than it has is refused before any
actor starts, naming the device (Ray would leave the actor pending, the job hanging at 0
samples); a worker that runs out of its device's memory mid-epoch is a fault that names
the device and what ran out, struck like any other."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import ConfigError
from edgewise.nn.data import digits_split
from edgewise.runtime.engine import train
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import STORE_MEMORY_MB, TrainConfig, check_reservations, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime, start_local

TRAIN_IDS = np.sort(digits_split()[0].ids)


def _cluster(nano_1_mb: int, pi5_mb: int = 8192) -> Cluster:
    return cluster_from_dict({
        "name": f"test-memory-{nano_1_mb}-{pi5_mb}",
        "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.3},
        "devices": [
            {"name": "nano-0", "type": "jetson-nano"},
            {"name": "nano-1", "type": "jetson-nano", "memory_mb": nano_1_mb},
            {"name": "pi5", "type": "raspberry-pi-5", "memory_mb": pi5_mb,
             "roles": ["parameter-server", "data-store", "manager"]},
        ]})


def test_a_plan_reserving_more_than_a_device_has_is_refused_naming_it() -> None:
    small = _cluster(nano_1_mb=200)
    plan = equal_plan(small, len(TRAIN_IDS))
    with pytest.raises(ConfigError, match=r"nano-1 has 200 MB of memory, less than the 1024 MB"
                                          r" the plan reserves on it for a worker"):
        check_reservations(small, plan, 1024)
    check_reservations(small, plan, 200)  # exactly what it has fits
    # the server and the store share the pi: their reservations add up
    pi = _cluster(nano_1_mb=4096, pi5_mb=1024 + STORE_MEMORY_MB - 1)
    with pytest.raises(ConfigError, match=r"pi5 .* for the parameter server and the data store"):
        check_reservations(pi, equal_plan(pi, len(TRAIN_IDS)), 1024)


@pytest.fixture(scope="module")
def tight() -> Iterator[RayRuntime]:
    """nano-1 has 300 MB: room for a 256 MB reservation, not for a worker process (Python,
    PyTorch and Ray alone take about 280 MB)."""
    runtime = start_local(_cluster(nano_1_mb=300))
    yield runtime
    runtime.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_worker_out_of_its_devices_memory_is_named_and_struck(
        tight: RayRuntime, tmp_path: object) -> None:
    ledger = StrikeLedger()
    ledger.strike("nano-1")
    ledger.strike("nano-1")  # its third strike excludes it, so the job goes on without it
    plan = equal_plan(tight.cluster, len(TRAIN_IDS))

    # nano-1's 300 MB hold no shard of the server beside its worker: auto keeps one server
    result = train(tight, TrainConfig(epochs=1, heartbeat_s=0.5, worker_memory_mb=256), plan,
                   ledger=ledger)

    (lost,) = result.interruptions
    assert lost.device == "nano-1"
    assert lost.reason.startswith("out of memory: nano-1: ")
    assert lost.reason.endswith("MB exceeds its 300 MB"), lost.reason
    assert result.final_plan.workers == ("nano-0",)
    assert np.array_equal(np.sort(result.epochs[-1].applied_ids), TRAIN_IDS)
    assert not [n for n in FaultInjector.actors("worker-")]


def test_the_refusal_comes_before_any_actor(tmp_path: object) -> None:
    """The engine checks before it starts anything: no Ray call is needed to refuse."""

    class NoRay:
        cluster = _cluster(nano_1_mb=200)

    with pytest.raises(ConfigError, match="nano-1 has 200 MB"):
        train(NoRay(), TrainConfig(epochs=1), equal_plan(NoRay.cluster, len(TRAIN_IDS)))  # type: ignore[arg-type]


def test_a_shard_reserves_beside_its_worker_and_auto_keeps_one_server_where_it_cannot() -> None:
    """A sharded server puts a member on every worker's device (``runtime.shards``): a
    device with room for its worker alone refuses ``workers`` naming the shard, and
    ``auto`` (the sync loop's default) keeps one server there instead."""
    from edgewise.runtime.plan import TrainConfig, run_shards

    tight = _cluster(nano_1_mb=300)
    plan = equal_plan(tight, len(TRAIN_IDS))
    with pytest.raises(ConfigError, match="for a worker and a shard of the parameter server"):
        check_reservations(tight, plan, 256, "workers")
    check_reservations(tight, plan, 256, "one")
    assert run_shards(tight, plan, TrainConfig(mode="sync", worker_memory_mb=256)) == "one"
    assert run_shards(tight, plan, TrainConfig(mode="sync", worker_memory_mb=150)) == "workers"
    assert run_shards(tight, plan, TrainConfig(mode="sync", ps_shards="workers",
                                               worker_memory_mb=256)) == "workers"  # refused later
