"""Ray nodes added to the local instance on this host, each carrying just some devices'
resources (``local_instance.LocalInstance.register``): what Ray's own
``ray.cluster_utils.Cluster.add_node`` does for its tests, with patience for a slow host."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["LOOPBACK", "NODE_START_S", "add_node", "end_node"]

_log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"

NODE_START_S = 300.0
"""How long a node added to the shared instance may take to register. Ray's own wait is a
fixed 30 s, which a loaded 2-core host overran (the node's raylet waits for its agents,
Python processes that import Ray): five tests' setups failed in one suite run
(2026-12-01), though the node came up moments later."""


def _patient_node(params: Any) -> Any:
    """Ray's ``Node`` for ``params``, started without Ray's fixed 30 s registration limit: a
    node that overran it is kept (its processes run on) and waited for by the caller."""
    from ray._private.node import Node

    class PatientNode(Node):
        def __init__(self) -> None:
            try:
                super().__init__(params, head=False, shutdown_at_exit=True,
                                 spawn_reaper=False)
            except Exception as exc:
                if "timed out during startup" not in str(exc):
                    raise
                _log.warning("a node added for a cluster is slow to register: waiting")

    return PatientNode()


def add_node(gcs_address: str, resources: dict[str, float], object_store_mb: int) -> Any:
    """Start one more Ray node on this host (loopback, no CPUs: work reaches it only
    through its custom ``resources``) and join it to the instance at ``gcs_address``; the
    node's handle, for :func:`end_node`. Ray has no public call for this; its test
    utilities (``ray.cluster_utils``) make their nodes the same way."""
    import ray
    from ray._private.parameter import RayParams

    head = ray._private.worker._global_node
    if head is None:
        raise RuntimeError("add_node needs the driver connected to the instance")
    params = RayParams(node_ip_address=LOOPBACK, gcs_address=gcs_address, num_cpus=0,
                       num_gpus=0, resources=resources,
                       object_store_memory=object_store_mb * 1024 * 1024,
                       min_worker_port=0, max_worker_port=0,
                       include_log_monitor=False,  # type: ignore[arg-type,unused-ignore]  # one per host
                       node_manager_port=0, dashboard_agent_listen_port=None,
                       session_name=head.session_name)
    node = _patient_node(params)
    try:
        _wait_for(resources, NODE_START_S)
    except RuntimeError:
        end_node(node)
        raise
    return node


def _wait_for(resources: dict[str, float], timeout_s: float = 60.0) -> None:
    import time

    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        have = ray.cluster_resources()  # type: ignore[no-untyped-call]
        if all(have.get(k, 0) >= v for k, v in resources.items()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"a Ray node with {sorted(resources)} did not register in {timeout_s} s")


def end_node(node: Any) -> None:
    """End the processes of a node :func:`add_node` started."""
    node.kill_all_processes(check_alive=False, allow_graceful=True)
