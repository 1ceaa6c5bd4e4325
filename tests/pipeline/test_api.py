"""The pipeline's manager endpoints and job: planning on the cluster or a random one, the
serving loop (HTTP requests and the job's own stream in order, a model switch that drops
nothing, stops honoured) against a dispatcher double that answers instantly, and the job on a
workload: refused at submission by its dry run, run by the pipeline's executor on Ray."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.jobs import JobStopped
from edgewise.pipeline.api import PIPELINE_KIND, cluster_problem, serving_model
from edgewise.pipeline.api_schemas import PipelineJobSpec
from edgewise.pipeline.api_serving import (
    NotServing,
    OwnStream,
    PipelineBusy,
    PipelineServer,
    serve,
)
from edgewise.pipeline.dispatcher import Result
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.service import JobManager, create_app

TOKEN = "test-token-0123456789abcdef"


class _Dispatcher:
    """Answers each input with its first value, in order; counts model versions."""

    window = 4
    restarts = resends = duplicates = 0

    def __init__(self) -> None:
        self.version, self.next_id, self.switched_at = 0, 0, -1

    def run(self, inputs: Iterable[np.ndarray[Any, Any]]) -> Iterator[Result]:
        for x in list(inputs):
            yield Result(self.next_id, np.asarray(x).reshape(-1)[:1].copy(), self.version, 0.01)
            self.next_id += 1

    def switch_model(self, model: Any, cuts: Iterable[int]) -> None:
        self.version += 1
        self.switched_at = self.next_id


class _Context:
    def __init__(self, stop_after: int | None = None) -> None:
        self.events: list[str] = []
        self.metrics: list[str] = []
        self.stop_after, self.progressed = stop_after, 0

    def event(self, kind: str, message: str, **data: Any) -> None:
        self.events.append(kind)

    def metric(self, name: str, value: float, *, step: float | None = None) -> None:
        self.metrics.append(name)

    def progress(self, fraction: float, **summary: Any) -> None:
        self.progressed += 1

    def check_stop(self) -> None:
        if self.stop_after is not None and self.progressed >= self.stop_after:
            raise JobStopped("stop")


def _own(count: int, switch_after: int | None = None, serve_s: float = 0.0) -> OwnStream:
    images = (np.full((1, 1, 8, 8), 1000.0 + k, np.float32) for k in itertools.count())
    return OwnStream(images, count, serve_s, switch_after, 1)


def test_http_requests_come_back_in_order_beside_the_jobs_own_stream() -> None:
    server, dispatcher, ctx = PipelineServer(), _Dispatcher(), _Context()
    answers: dict[int, list[float]] = {}

    def client(k: int) -> None:
        inputs = np.stack([np.full((1, 1, 8, 8), 10.0 * k + j, np.float32) for j in range(5)])
        answers[k] = [float(r.output[0]) for r in server.infer(inputs, timeout_s=10)]

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    figures = serve(dispatcher, (0, 9), server, _own(40, serve_s=1.0), ctx,  # type: ignore[arg-type]
                    serving_model)
    for t in threads:
        t.join()
    assert answers == {k: [10.0 * k + j for j in range(5)] for k in range(6)}
    assert figures["results"] == 40 + 30 and ctx.metrics.count("request_latency_s") == 70
    assert "throughput_rps" in ctx.metrics


def test_a_switch_drops_nothing_and_later_requests_see_the_new_version() -> None:
    server, dispatcher, ctx = PipelineServer(), _Dispatcher(), _Context()
    figures = serve(dispatcher, (0, 9), server, _own(40, switch_after=16), ctx,  # type: ignore[arg-type]
                    serving_model)
    assert figures["results"] == 40 and figures["version"] == 1
    assert dispatcher.switched_at == 16 and ctx.events == ["model-switch"]


def test_a_stop_ends_the_loop_and_waiting_requests_fail_cleanly() -> None:
    server, ctx = PipelineServer(max_waiting_inputs=8), _Context(stop_after=2)
    with pytest.raises(JobStopped):
        serve(_Dispatcher(), (0, 9), server, _own(10_000), ctx, serving_model)  # type: ignore[arg-type]
    with pytest.raises(PipelineBusy, match="more than 8"):
        server.infer(np.zeros((9, 1, 1, 8, 8), np.float32), timeout_s=0.1)
    server.close("the job ended")
    with pytest.raises(PipelineBusy, match="no longer serves"):
        server.infer(np.zeros((1, 1, 1, 8, 8), np.float32), timeout_s=0.1)


def test_the_cluster_problem_respects_memory_caps_and_the_dispatcher(cluster: Cluster) -> None:
    from edgewise.pipeline.api import _chain

    chain = _chain(serving_model(0))
    problem = cluster_problem(cluster, chain, None, "ps", 0.2)
    assert problem.nodes == ("tx2", "nano") and problem.dispatcher == "ps"
    assert set(problem.memory_bytes) == {200_000}
    assert problem.bandwidth_mbps[0, 1] == 100.0  # ps–tx2 is the explicit 100 Mb/s link
    with pytest.raises(ConfigError, match="other than the dispatcher"):
        cluster_problem(cluster, chain, ["ps"], "ps", None)
    with pytest.raises(ConfigError, match="ghost"):
        cluster_problem(cluster, chain, ["ghost"], "ps", None)


@pytest.fixture
def client(backend: JobManager, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(backend, TOKEN),
                    headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


@pytest.mark.parametrize("policy", ["bottleneck-search", "seifer", "exact"])
def test_plans_cover_the_chain_once_within_memory(client: TestClient, policy: str) -> None:
    body = {"model": "digits-cnn", "policy": policy, "on": "random", "nodes": 5,
            "memory_mb": 0.2, "seed": 3}
    response = client.post("/api/v1/pipeline/plan", json=body)
    assert response.status_code == 200, response.text
    plan = response.json()
    spans = [(s["first"], s["end"]) for s in plan["stages"]]
    assert spans[0][0] == 0 and spans[-1][1] == plan["segments"] == 9
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert all(s["memory_bytes"] <= 0.2 * 2**20 for s in plan["stages"])
    assert len({s["device"] for s in plan["stages"]}) == len(spans)


def test_planning_refuses_what_cannot_fit_or_is_too_big(client: TestClient) -> None:
    tiny = client.post("/api/v1/pipeline/plan", json={"memory_mb": 0.02})
    assert tiny.status_code == 422 and "memory" in tiny.text
    exact = client.post("/api/v1/pipeline/plan",
                        json={"policy": "exact", "on": "random", "nodes": 20})
    assert exact.status_code == 422 and "limited to 6" in exact.text
    assert client.post("/api/v1/pipelines/job-0001/infer",
                       json={"inputs": [[0.0] * 64]}).status_code == 409
    assert client.post("/api/v1/pipelines/job-0001/infer",
                       json={"inputs": [[0.0] * 63]}).status_code == 422


# the job on the user's own model (a workload)
DIGITS_WORKLOAD = {"model": "digits-cnn", "data": "digits"}
JOBS = "/api/v1/jobs"


def _refusal(client: TestClient, **spec: Any) -> tuple[str, str]:
    """The 422's first problem: where (dotted) and what."""
    response = client.post(JOBS, json={"kind": "pipeline", "spec": spec})
    assert response.status_code == 422, response.text
    problem = response.json()["detail"][0]
    return ".".join(str(p) for p in problem["loc"]), problem["msg"]


def test_a_workload_is_dry_run_at_submission_and_refused_naming_its_field(
        client: TestClient, backend: JobManager) -> None:
    where, said = _refusal(client, workload={"model": "hf:no-such-org/no-such-model",
                                             "data": "digits"})
    assert "hub" in said.lower() and "extra" not in said, said
    where, said = _refusal(client, workload={**DIGITS_WORKLOAD, "classes": 7})
    assert where.endswith("workload.task.classes") and "7" in said, (where, said)
    where, said = _refusal(client, workload=DIGITS_WORKLOAD, serve_seconds=3.0)
    assert where.endswith("serve_seconds") and "no HTTP requests" in said, (where, said)
    assert client.get(JOBS).json()["jobs"] == []
    created = client.post(JOBS, json={"kind": "pipeline", "spec": {
        "workload": DIGITS_WORKLOAD, "memory_cap_mb": 0.14, "requests": 8}})
    assert created.status_code == 201, created.text
    backend.live.put(created.json()["id"], NotServing("takes no HTTP requests"))
    refused = client.post(f"/api/v1/pipelines/{created.json()['id']}/switch", json={"seed": 1})
    assert refused.status_code == 409 and "takes no HTTP requests" in refused.text


class _RunContext(_Context):
    """A job context on a real runtime, recording what the job publishes."""

    def __init__(self, runtime: RayRuntime) -> None:
        super().__init__()
        self.runtime, self.cluster = runtime, runtime.cluster
        self.published: list[object | None] = []

    def limited(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def publish(self, handle: object | None) -> None:
        self.published.append(handle)


@pytest.mark.ray
def test_a_workload_job_runs_the_executor_and_matches_the_whole_model(
        small_cluster: Cluster) -> None:
    spec = PipelineJobSpec.model_validate({"workload": DIGITS_WORKLOAD, "requests": 16,
                                           "switch_after": 8, "window": 4,
                                           "devices": ["nano-0", "nano-1"]})
    runtime = start_local(small_cluster)
    try:
        ctx = _RunContext(runtime)
        planned = PIPELINE_KIND.plan(spec, ctx)  # type: ignore[arg-type]
        figures = PIPELINE_KIND.execute(spec, planned, ctx)  # type: ignore[arg-type]
    finally:
        runtime.shutdown()
    # two devices, each offered just under the whole model: cut in two, as the command cuts
    assert planned.view["workload"]["segments"] == 9 and figures["stages"] == 2
    assert figures["results"] == 16 and figures["in_order"] and figures["duplicates"] == 0
    assert figures["version"] == 1 and ctx.events.count("model-switch") == 1
    assert figures["max_abs_diff"] <= 1e-4 < figures["reference_max_abs"]
    assert figures["top1_agreement"] == 1.0 and figures["outputs_equal_to_the_model"]
    assert isinstance(ctx.published[0], NotServing) and ctx.published[-1] is None
    assert ctx.metrics.count("request_latency_s") == 16
