"""The test session's shared local Ray instance (``share_local``): clusters that name the
same device with another memory keep their own resources under their own tags, and share
them with the same memory (no node added); a known cluster does not restart the instance,
and a shared runtime's shutdown leaves the instance running."""

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
    assert not a.owned and not b.owned and a.tag_of("nano-0") != b.tag_of("nano-0")
    resources = ray.cluster_resources()  # type: ignore[no-untyped-call]
    assert resources[f"device-mem:{a.tag_of('nano-0')}nano-0"] == 1000
    assert resources[f"device-mem:{b.tag_of('nano-0')}nano-0"] == 3000
    starts = pool.starts
    again = start_local(small)  # type: ignore[arg-type]
    assert pool.starts == starts and again.tag_of("nano-0") == a.tag_of("nano-0")
    probe = _Probe.options(**b.actor_options("nano-0", 2500)).remote()  # type: ignore[attr-defined]
    assert ray.get(probe.answer.remote(), timeout=60) == 42  # large's memory, not small's
    a.shutdown()
    assert ray.is_initialized() and pool.running()  # the instance outlives a shared runtime
    ray.kill(probe)
    again.shutdown()
    b.shutdown()


def test_clusters_naming_one_device_with_one_memory_share_its_node() -> None:
    pool = shared()
    assert pool is not None
    first = start_local(_one_nano("same-a", 1234))  # type: ignore[arg-type]
    added = pool.added
    second = start_local(cluster_from_dict({"name": "same-b", "devices": [  # type: ignore[arg-type]
        {"name": "nano-0", "type": "jetson-nano", "memory_mb": 1234},
        {"name": "nano-9", "type": "jetson-nano", "memory_mb": 1234}]}, source="test"))
    assert pool.added == added + 1  # a node for nano-9 alone: nano-0 is carried already
    assert second.tag_of("nano-0") == first.tag_of("nano-0") == "m1234."
    held = _Probe.options(**first.actor_options("nano-0", 1000)).remote()  # type: ignore[attr-defined]
    assert ray.get(held.answer.remote(), timeout=60) == 42
    free = ray.available_resources().get("device-mem:m1234.nano-0", 0)  # type: ignore[no-untyped-call]
    assert free == 234  # one device, one memory: what one run holds, the other cannot
    ray.kill(held)
    first.shutdown()
    second.shutdown()


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
        return any(f"device:{runtimes[k].tag_of('nano-0')}nano-0" in keys for _, keys in pool.nodes)

    runtimes[-1].shutdown()  # the others still run: only the last one's node may go
    assert carried(0) and not carried(len(runtimes) - 1)
    for runtime in runtimes[:-1]:
        runtime.shutdown()
    assert len(pool.nodes) == max(KEPT_NODES, in_use) and not carried(0)  # the oldest went
    added = pool.added
    first = start_local(clusters[0])  # type: ignore[arg-type]
    assert pool.added == added + 1 and first.tag_of("nano-0") == runtimes[0].tag_of("nano-0")
    probe = _Probe.options(**first.actor_options("nano-0", 1000)).remote()  # type: ignore[attr-defined]
    assert ray.get(probe.answer.remote(), timeout=60) == 42
    first.shutdown()
    assert len(pool.nodes) == max(KEPT_NODES, in_use)


def test_a_node_slow_to_register_is_waited_for_and_other_failures_raise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's node start gives a raylet 30 s to register, fixed; a loaded host overran it.
    The node is kept and waited for (``NODE_START_S``) instead; any other failure of the
    start is raised as it was."""
    from ray._private import node as ray_node

    from edgewise.runtime import added_nodes

    failure = {"text": "The current node timed out during startup. This could happen..."}

    def start(self: object, *args: object, **kwargs: object) -> None:
        self.all_processes = {"raylet": []}  # type: ignore[attr-defined]
        raise Exception(failure["text"])

    monkeypatch.setattr(ray_node.Node, "__init__", start)
    slow = added_nodes._patient_node(params=None)
    assert slow.all_processes == {"raylet": []}  # the handle end_node needs
    failure["text"] = "some other failure"
    with pytest.raises(Exception, match="some other failure"):
        added_nodes._patient_node(params=None)


def test_a_head_slow_to_register_is_started_again_and_its_daemons_ended(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.init`` gives the head 30 s to register, fixed: a loaded host's first start
    failed so. The start is tried again, after ending what the failed one left running;
    another failure, or the last attempt's, is raised."""
    from edgewise.runtime import local_instance

    calls: list[str] = []
    children = [{1}, {1, 7, 8}, {1, 7, 8}]  # before, after the failed start, before the next
    ended: list[set[int]] = []

    def init(**kwargs: object) -> None:
        calls.append("init")
        if len(calls) == 1:
            raise Exception("The current node timed out during startup. ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(local_instance, "_ray_children", lambda: children.pop(0))
    monkeypatch.setattr(local_instance, "_end_processes", ended.append)
    monkeypatch.setattr(local_instance, "_end_log_monitor", lambda: None)
    monkeypatch.setattr(local_instance, "loopback_only", lambda: None)
    monkeypatch.setattr(ray, "get_runtime_context",
                        lambda: type("Context", (), {"gcs_address": "127.0.0.1:1"})())

    assert local_instance.init_local({}, 2, 64) == "127.0.0.1:1"
    assert calls == ["init", "shutdown", "init"] and ended == [{7, 8}]

    def broken(**kwargs: object) -> None:
        raise Exception("some other failure")

    monkeypatch.setattr(ray, "init", broken)
    children[:] = [set()] * 3
    with pytest.raises(Exception, match="some other failure"):
        local_instance.init_local({}, 2, 64)
