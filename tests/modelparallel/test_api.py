"""SROLE's manager endpoint and job: a round of placements through the API, the cluster seen
as SROLE's edge network, and the job's workload: checked at submission, split into its
levels and trained by the one executor."""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain, combinations
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from edgewise.cluster import load_cluster
from edgewise.cluster.examples import example_path
from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.jobs import JobContext, run_inline
from edgewise.jobs.workload import HttpWorkload
from edgewise.modelparallel import realjob
from edgewise.modelparallel.api import (
    EXAMPLE_BATCH,
    EXAMPLE_MEMORY_CAP_MB,
    MODELPARALLEL_KIND,
    cluster_network,
    planned_job,
)
from edgewise.modelparallel.api_schemas import ModelParallelJobSpec
from edgewise.modelparallel.emulated import stage_runs
from edgewise.modelparallel.problem import ALPHA
from edgewise.modelparallel.realbench import digits_batches
from edgewise.modelparallel.realjob import (
    bench_levels,
    checked_workload,
    training_batches,
    workload_job,
    workload_levels,
)
from edgewise.runtime.emulation import EmulationConfig, stretch_factors
from edgewise.runtime.ray_cluster import start_local
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


# the job's workload
DIGITS_CNN = {"model": "digits-cnn", "data": "digits"}


def _submit(client: TestClient, spec: dict[str, Any]) -> Any:
    return client.post("/api/v1/jobs", json={"kind": "modelparallel", "spec": spec})


def test_a_bad_workload_is_refused_at_submission(client: TestClient) -> None:
    hub = _submit(client, {"workload": {"model": "hf:no-such-org/no-such-model"}})
    assert hub.status_code == 422 and "Hub" in hub.text and "extra" not in hub.text
    classes = _submit(client, {"workload": {**DIGITS_CNN, "classes": 4}})  # the dry run's
    assert classes.status_code == 422 and "workload.task.classes" in classes.text
    assert client.get("/api/v1/jobs").json()["jobs"] == []
    assert _submit(client, {"iterations": 4, "workload": DIGITS_CNN}).status_code == 201


def test_the_digits_cnn_workload_is_the_built_in_job() -> None:
    """Its levels (cut by graph analysis) compute what the built-in CNN's do, from the same
    seed's weights; its job (``make_job``, per sample) is sized as the built-in's, each
    activation counted once per sample of the batch; and at seed 0 it trains on the same
    batches."""
    workload = checked_workload(HttpWorkload.model_validate(DIGITS_CNN).to_workload())
    mine, builtin = workload_levels(workload, seed=3), bench_levels(seed=3)
    x = torch.randn(5, 1, 8, 8)
    assert len(mine.model) == 4 and mine.cuts == (0, 1, 2, 3, 4)
    assert len(builtin.cuts) == 5  # four levels too
    torch.testing.assert_close(mine.model(x), builtin.model(x))
    _, job = planned_job(ModelParallelJobSpec(batch_size=32, iterations=10), 1)
    expected = workload_job(workload, 1, 32, 10)
    assert len(expected.partitions) == len(job.partitions) == 4
    for a, b in zip(job.partitions, expected.partitions, strict=True):
        assert (a.memory_mb, a.out_mb, a.gflop) == pytest.approx((b.memory_mb, b.out_mb, b.gflop))
    assert job.input_mb == pytest.approx(expected.input_mb) == 32 * 64 * 4 / 1e6  # 8×8 float32
    for (a, b), (c, d) in zip(training_batches(workload, 16, 3), digits_batches(16, 3),
                              strict=True):
        assert np.array_equal(a, c) and np.array_equal(b, d)


def test_the_example_spreads_the_cnn_over_the_devices() -> None:
    """The example's memory cap holds the built-in CNN's largest level below the overload
    threshold, and every set of levels the planner may put on one device as the executor
    reserves it (whole MB), but not levels 0 and 1 together: its plan parts them."""
    cluster = load_cluster(example_path("deep-edge-testbed.yaml"))
    spec = ModelParallelJobSpec.model_validate(MODELPARALLEL_KIND.example(cluster))
    cap = EXAMPLE_MEMORY_CAP_MB
    assert (spec.memory_cap_mb, spec.batch_size) == (cap, EXAMPLE_BATCH)
    runtime = SimpleNamespace(cluster=cluster, stretch=stretch_factors(cluster, EmulationConfig()))
    planned = MODELPARALLEL_KIND.plan(spec, cast(JobContext, _Recorder(runtime)))
    _, job, _, placement = planned.payload
    memory = [p.memory_mb for p in job.partitions]
    assert max(memory) <= ALPHA * cap < cap < memory[0] + memory[1]
    for levels in chain.from_iterable(combinations(memory, k) for k in range(1, 5)):
        assert sum(levels) > cap or sum(max(1, math.ceil(m)) for m in levels) <= cap
    assert placement.nodes[0] != placement.nodes[1] and len(stage_runs(placement)) >= 2


class _Recorder:
    """A JobContext that plans inline and keeps the metrics it is told."""

    def __init__(self, runtime: Any) -> None:
        self.cluster, self.runtime, self.limited = runtime.cluster, runtime, run_inline
        self.metrics: dict[str, list[float]] = {}
        self.progressed = 0

    def metric(self, name: str, value: float, *, step: float | None = None) -> None:
        self.metrics.setdefault(name, []).append(value)

    def progress(self, fraction: float, **summary: Any) -> None:
        self.progressed += 1

    def check_stop(self) -> None:
        pass


@pytest.mark.ray
def test_the_job_trains_the_workloads_levels_with_the_executor(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    models: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        models.append((kwargs["model"], kwargs["cuts"]))
        return execute(*args, **kwargs)

    execute = realjob.execute
    monkeypatch.setattr(realjob, "execute", spy)
    spec = ModelParallelJobSpec.model_validate(
        {"iterations": 4, "rounds": 5, "batch_size": 16, "workload": DIGITS_CNN})
    runtime = start_local(cluster, EmulationConfig(host_cores=2))
    try:
        ctx = _Recorder(runtime)
        planned = MODELPARALLEL_KIND.plan(spec, cast(JobContext, ctx))
        summary = MODELPARALLEL_KIND.execute(spec, planned, cast(JobContext, ctx))
    finally:
        runtime.shutdown()
    (model, cuts), = models  # the one executor, once, on the workload's four levels
    assert len(model) == 4 and cuts == (0, 1, 2, 3, 4)
    assert planned.view["workload"] == {**DIGITS_CNN, "levels": 4}
    assert summary["model"] == "digits-cnn on digits" and summary["iterations"] == 4
    assert summary["stages"] == len(summary["devices"].split(" -> ")) >= 1
    assert 0.0 <= summary["val_accuracy"] <= 1.0 and summary["loss_first"] > 0
    assert len(ctx.metrics["loss"]) == len(ctx.metrics["iteration_s"]) == 4 == ctx.progressed
