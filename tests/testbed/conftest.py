"""Testbed tests: the pure parts run anywhere; the rest need root, ip, tc, namespaces and
cgroups. Without them those are skipped with the reason, except in CI (``CI=true``), where
a skipped testbed test is a failure: the CI machines have root."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from edgewise.testbed.host import missing
from tests.needs import require

# Four devices, the head (server, store, manager) on the fastest, with a switch port that
# its links share, a per-pair rate on one link: the smallest cluster on which training
# survives a lost worker and a cut link.
TESTBED_CLUSTER = {
    "name": "testbed-four",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.3},
    "devices": [
        {"name": "nano-0", "type": "jetson-nano"},
        {"name": "nano-1", "type": "jetson-nano"},
        {"name": "nano-2", "type": "jetson-nano"},
        {"name": "tx2", "type": "jetson-tx2", "port_mbps": 1000,
         "roles": ["parameter-server", "data-store", "manager"]},
    ],
    "links": [{"between": ["nano-2", "tx2"], "bandwidth_mbps": 200, "latency_ms": 1.0}],
}


def require_testbed_host() -> None:
    """Skip (fail in CI) unless this host can run a testbed."""
    lacks = missing()
    if not lacks:
        return
    require(False, "this host cannot run a testbed: it lacks " + "; ".join(lacks))


@pytest.fixture(scope="session")
def testbed_cluster_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("testbed") / "testbed-four.yaml"
    path.write_text(yaml.safe_dump(TESTBED_CLUSTER))
    return path
