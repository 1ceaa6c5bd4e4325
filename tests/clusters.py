"""The emulated clusters that several test modules run on, in one place, so that the
session's shared Ray instance carries their devices from its first start
(tests/conftest.py): a cluster whose devices it lacks gets a Ray node of its own when its
first test runs (a raylet and two agents, and a new process for each of its actors, since
the pooled ones live on other nodes)."""

from __future__ import annotations

from typing import Any

SMALL_CLUSTER: dict[str, Any] = {
    "name": "test-three-nanos",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.3},
    "devices": [
        {"name": "nano-0", "type": "jetson-nano"},
        {"name": "nano-1", "type": "jetson-nano"},
        {"name": "nano-2", "type": "jetson-nano"},
        {"name": "pi5", "type": "raspberry-pi-5",
         "roles": ["parameter-server", "data-store", "manager"]},
    ],
}

LAB_CLUSTER: dict[str, Any] = {
    "name": "lab",
    "devices": [
        {"name": "tx2", "type": "jetson-tx2"},
        {"name": "nano", "type": "jetson-nano"},
        {"name": "ps", "type": "raspberry-pi-5", "roles": ["parameter-server"]},
    ],
    "links": [{"between": ["tx2", "ps"], "bandwidth_mbps": 100}],
}
"""The manager API tests' cluster (the ``cluster`` fixture), which SROLE's job also runs on."""

SCALE_CLUSTER: dict[str, Any] = {
    "name": "test-scale",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.2},
    "devices": [*({"name": f"pi-{i}", "type": "raspberry-pi-4-4gb"} for i in range(4)),
                {"name": "host", "type": "raspberry-pi-5", "roles": ["manager"]}],
}
"""Four Pis and a dispatcher: the large-model pipeline's tests (tests/pipeline/test_scale.py)
and the engine's overhead pairs."""

MP_SLOW_MBPS = 4.0
MP_CLUSTER: dict[str, Any] = {
    "name": "test-mp",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.0},
    "links": [{"between": ["n1", "n2"], "bandwidth_mbps": MP_SLOW_MBPS, "latency_ms": 0.0}],
    "devices": [{"name": f"n{i}", "type": "jetson-nano"} for i in range(4)],
}
"""SROLE's model-parallel runs (tests/modelparallel/test_run.py): one slow link."""

TWO_NANOS_SIFT: dict[str, Any] = {
    "name": "two-nanos-sift",
    "devices": [
        {"name": "nano-0", "type": "jetson-nano"}, {"name": "nano-1", "type": "jetson-nano"},
        {"name": "pi", "type": "raspberry-pi-5",
         "roles": ["parameter-server", "data-store", "manager"]}],
    "background_apps": [{"name": "sift-0", "device": "nano-0", "kind": "sift",
                         "period_ms": 200}],
}
"""A Deep-Edge plan with a SIFT app really running (tests/update/test_cluster_plan.py)."""

SESSION_CLUSTERS = (SMALL_CLUSTER, LAB_CLUSTER, SCALE_CLUSTER, MP_CLUSTER, TWO_NANOS_SIFT)
