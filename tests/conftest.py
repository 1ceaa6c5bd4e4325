"""Shared fixtures: a real local Ray instance emulating a small cluster."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.service import JobManager, Store
from edgewise.service.problems import discover_problems, job_kinds

SMALL_CLUSTER = {
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


@pytest.fixture(scope="session")
def small_cluster() -> Cluster:
    return cluster_from_dict(SMALL_CLUSTER, source="test")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Traced-chain cache in a temporary folder, not the user's ~/.cache."""
    before = os.environ.get("EDGEWISE_CACHE_DIR")
    os.environ["EDGEWISE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("EDGEWISE_CACHE_DIR", None)
    else:
        os.environ["EDGEWISE_CACHE_DIR"] = before


# The manager API tests (service and the problems' routers): a small cluster, a dry-run backend.
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
def backend(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobManager]:
    """A dry-run manager: it checks and stores jobs of every installed kind, runs none."""
    state = tmp_path_factory.mktemp("manager")
    store = Store(state / "manager.db")
    yield JobManager(store, job_kinds(discover_problems()), cluster, state_dir=state)
    store.close()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every way to open a connection raises and is recorded: the list of attempts."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts
