"""SROLE's manager endpoint and job: a round of placements through the API, and the
cluster seen as SROLE's edge network."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.modelparallel.api import cluster_network
from edgewise.service import JobManager, create_app

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture
def client(backend: JobManager) -> Iterator[TestClient]:
    with TestClient(create_app(backend, TOKEN),
                    headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def test_a_round_of_placements_is_shielded(client: TestClient) -> None:
    body = {"method": "srole-c", "model": "rnn", "edges": 5, "rounds": 20, "seed": 2}
    response = client.post("/api/v1/modelparallel/place", json=body)
    assert response.status_code == 200, response.text
    placed = response.json()
    assert len(placed["jobs"]) == 3  # three jobs per cluster of five nodes
    for job in placed["jobs"]:
        assert len(job["proposed"]) == len(job["executed"]) > 0
        assert all(0 <= node < 5 for node in job["executed"])
        assert job["failed"] or job["jct_s"] > 0
    assert placed["collisions_after_shield"] <= placed["collisions"]


@pytest.mark.parametrize("change", [{"edges": 12}, {"rounds": 0}, {"method": "greedy"},
                                    {"workload": 10}, {"edges": 1000}])
def test_bad_requests_are_422(client: TestClient, change: dict[str, object]) -> None:
    assert client.post("/api/v1/modelparallel/place", json=change).status_code == 422


def test_the_cluster_as_an_edge_network(cluster: Cluster) -> None:
    network = cluster_network(cluster, None, 1000.0)
    assert [n.name for n in network.nodes] == list(cluster.device_names)
    assert all(n.memory_mb == 1000.0 for n in network.nodes)
    assert max(n.cpu for n in network.nodes) == 1.0  # the fastest device: one host core
    links = [n.bandwidth_mbps for n in network.nodes]
    assert links[0] == links[2] == 100.0 < links[1]  # the explicit tx2–ps link is the slowest
    assert network.candidates(0) == (0, 1, 2)  # one cluster, all in range
    stretched = cluster_network(cluster, {"tx2": 2.0, "nano": 4.0, "ps": 8.0}, None)
    assert [n.cpu for n in stretched.nodes] == [0.5, 0.25, 0.125]


def test_a_modelparallel_job_checks_its_origin(backend: JobManager) -> None:
    job = backend.submit("modelparallel", {"iterations": 5, "memory_cap_mb": 100.0})
    assert job.kind == "modelparallel" and job.state == "pending"
    with pytest.raises(ConfigError, match="ghost"):
        backend.submit("modelparallel", {"origin": "ghost"})
