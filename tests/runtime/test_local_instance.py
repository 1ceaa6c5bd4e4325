"""The test session's shared local Ray instance (``share_local``): clusters that name the
same device keep their own resources under their own tags, a known cluster does not restart
the instance, and a shared runtime's shutdown leaves the instance running."""

from __future__ import annotations

import pytest
import ray

from edgewise.cluster.schema import cluster_from_dict
from edgewise.runtime.ray_cluster import shared, start_local

pytestmark = pytest.mark.ray


def _one_nano(name: str, memory_mb: int) -> object:
    return cluster_from_dict({"name": name, "devices": [
        {"name": "nano-0", "type": "jetson-nano", "memory_mb": memory_mb}]}, source="test")


@ray.remote
class _Probe:
    def answer(self) -> int:
        return 42


def test_clusters_naming_one_device_share_the_instance_apart() -> None:
    pool = shared()
    assert pool is not None, "tests/conftest.py shares one local instance per session"
    small, large = _one_nano("small", 1000), _one_nano("large", 3000)
    a = start_local(small)  # type: ignore[arg-type]
    b = start_local(large)  # type: ignore[arg-type]
    assert not a.owned and not b.owned and a.tag != b.tag
    resources = ray.cluster_resources()  # type: ignore[no-untyped-call]
    assert resources[f"device-mem:{a.tag}nano-0"] == 1000
    assert resources[f"device-mem:{b.tag}nano-0"] == 3000
    starts = pool.starts
    again = start_local(small)  # type: ignore[arg-type]
    assert pool.starts == starts and again.tag == a.tag
    probe = _Probe.options(**b.actor_options("nano-0", 2500)).remote()  # type: ignore[attr-defined]
    assert ray.get(probe.answer.remote(), timeout=60) == 42  # large's memory, not small's
    a.shutdown()
    assert ray.is_initialized() and pool.running()  # the instance outlives a shared runtime
    ray.kill(probe)
    again.shutdown()
    b.shutdown()


def test_a_shutdown_ends_all_but_the_latest_idle_nodes_and_a_trimmed_cluster_comes_back(
        ) -> None:
    """Idle nodes cost CPU: a shared runtime's shutdown ends the added nodes no running
    runtime uses, beyond the ``KEPT_NODES`` most recently used; a node in use stays; a
    cluster whose node was ended gets one again and runs."""
    from edgewise.runtime.local_instance import KEPT_NODES

    pool = shared()
    assert pool is not None
    pool.trim(keep=0)
    in_use = len(pool.nodes)  # of runtimes other tests of the session still hold
    clusters = [_one_nano(f"trim-{k}", 1100 + k) for k in range(KEPT_NODES + 2)]
    runtimes = [start_local(c) for c in clusters]  # type: ignore[arg-type]
    assert len(pool.nodes) == in_use + KEPT_NODES + 2

    def carried(k: int) -> bool:
        return any(f"device:{runtimes[k].tag}nano-0" in keys for _, keys in pool.nodes)

    runtimes[-1].shutdown()  # the others still run: only the last one's node may go
    assert carried(0) and not carried(len(runtimes) - 1)
    for runtime in runtimes[:-1]:
        runtime.shutdown()
    assert len(pool.nodes) == max(KEPT_NODES, in_use) and not carried(0)  # the oldest went
    added = pool.added
    first = start_local(clusters[0])  # type: ignore[arg-type]
    assert pool.added == added + 1 and first.tag == runtimes[0].tag
    probe = _Probe.options(**first.actor_options("nano-0", 1000)).remote()  # type: ignore[attr-defined]
    assert ray.get(probe.answer.remote(), timeout=60) == 42
    first.shutdown()
    assert len(pool.nodes) == max(KEPT_NODES, in_use)
