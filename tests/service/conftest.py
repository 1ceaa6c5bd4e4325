"""Fixtures for the manager API tests: a small cluster and a dry-run backend over it."""

from __future__ import annotations

import pytest

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.service import InMemoryBackend


@pytest.fixture
def cluster() -> Cluster:
    return cluster_from_dict(
        {
            "name": "lab",
            "devices": [
                {"name": "tx2", "type": "jetson-tx2"},
                {"name": "nano", "type": "jetson-nano"},
                {"name": "ps", "type": "raspberry-pi-5", "roles": ["parameter-server"]},
            ],
            "links": [{"between": ["tx2", "ps"], "bandwidth_mbps": 100}],
        }
    )


@pytest.fixture
def backend(cluster: Cluster) -> InMemoryBackend:
    return InMemoryBackend(cluster, clock=lambda: 1000.0)
