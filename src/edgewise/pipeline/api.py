"""The manager's pipeline endpoints and its ``pipeline`` job: plan a model's partition and
placement (``/pipeline/plan``), run a pipelined inference job on the cluster (SEIFER),
and serve it (``/pipelines/{id}/infer``, ``/pipelines/{id}/switch``)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import torch
from fastapi import APIRouter, HTTPException, status
from fastapi import Path as PathParam
from torch import nn

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.jobs import (
    JOB_ID_PATTERN,
    ApiContext,
    JobContext,
    JobKind,
    Planned,
    ProblemApi,
)
from edgewise.nn.chain import ModelChain
from edgewise.nn.data import digits_split
from edgewise.nn.graph import candidate_points, layer_dag, to_chain
from edgewise.nn.models import build_model
from edgewise.pipeline.api_schemas import (
    InferRequest,
    InferResponse,
    PipelineJobSpec,
    PipelinePlanRequest,
    PipelinePlanResponse,
    StageView,
    SwitchRequest,
)
from edgewise.pipeline.api_serving import (
    NotServing,
    OwnStream,
    PipelineBusy,
    PipelineServer,
    serve,
)
from edgewise.pipeline.api_workload import (
    JobWorkload,
    check_serving,
    execute_workload,
    job_problem,
    job_workload,
)
from edgewise.pipeline.dispatcher import Dispatcher
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.workload import stage_nodes
from edgewise.wire.activation import ActivationCodec

__all__ = ["API", "PIPELINE_KIND", "cluster_problem", "plan_request", "router", "serving_model"]

MB = 1e6
SERVED_MODEL = "digits-cnn"
JobId = Annotated[str, PathParam(pattern=JOB_ID_PATTERN, description="a pipeline job's id")]


def serving_model(seed: int) -> nn.Sequential:
    """The digits CNN (weights from ``seed``) as one ``nn.Sequential`` of its 9 layers, the
    segments a pipeline may be cut between."""
    net = build_model(SERVED_MODEL, seed)
    layers = [*net.get_submodule("features").children(), *net.get_submodule("head").children()]
    return nn.Sequential(*layers).eval()


def _chain(model: nn.Sequential) -> ModelChain:
    dag = layer_dag(model, torch.zeros(1, 1, 8, 8))
    chain = to_chain(SERVED_MODEL, dag, candidate_points(dag))
    if chain.n_segments != len(model):
        raise ConfigError(f"expected one segment per layer, got {chain.n_segments}",
                          field="model")
    return chain


def _dispatcher_device(cluster: Cluster, wanted: str | None) -> str:
    if wanted is not None:
        if wanted not in cluster.device_names:
            raise ConfigError(f"no such device in the cluster: {wanted!r}", field="dispatcher")
        return wanted
    managers = cluster.with_role(Role.MANAGER)
    return (managers[0] if managers else cluster.devices[-1]).name


def cluster_problem(cluster: Cluster, chain: ModelChain, devices: list[str] | None,
                    dispatcher: str, memory_cap_mb: float | None) -> PipelineProblem:
    """The placement problem on ``cluster``: nodes ``devices`` (default: all but the
    dispatcher), each offering its memory (at most ``memory_cap_mb``), the cluster's
    bandwidths between them and the dispatcher, raw float32 activations."""
    nodes, bw = stage_nodes(cluster, dispatcher, devices)
    cap = memory_cap_mb if memory_cap_mb is not None else float("inf")
    memory = tuple(int(min(cluster.device(n).memory_mb, cap) * MB) for n in nodes)
    return PipelineProblem(chain, nodes, memory, bw, compression=1.0,
                           dispatcher=dispatcher)


def _stages(problem: PipelineProblem, plan: PipelinePlan) -> list[StageView]:
    chain = problem.chain
    return [StageView(stage=k, device=problem.nodes[n], first=plan.cuts[k],
                      end=plan.cuts[k + 1],
                      memory_bytes=sum(chain.memory_bytes[plan.cuts[k]:plan.cuts[k + 1]]),
                      output_bytes=chain.output_bytes[plan.cuts[k + 1] - 1])
            for k, n in enumerate(plan.nodes)]


def _bound(plan: PipelinePlan) -> tuple[float | None, float | None]:
    finite = np.isfinite(plan.bottleneck_s) and plan.bottleneck_s > 0
    return (plan.bottleneck_s if np.isfinite(plan.bottleneck_s) else None,
            1.0 / plan.bottleneck_s if finite else None)


def plan_request(request: PipelinePlanRequest, cluster: Cluster | None) -> PipelinePlanResponse:
    """``/pipeline/plan``: the request's model, planned by its policy (run by the limiter)."""
    from edgewise.nn.chain_cache import cached_chain

    chain = _chain(serving_model(request.seed)) if request.model == SERVED_MODEL \
        else cached_chain(request.model)
    if request.on == "random":
        problem = random_instance(request.nodes, chain, np.random.default_rng(request.seed),
                                  memory_mb=(request.memory_mb, request.memory_mb))
    else:
        assert cluster is not None
        problem = cluster_problem(cluster, chain, None, _dispatcher_device(cluster, None),
                                  request.memory_mb)
    started = time.perf_counter()
    plan = get_policy(request.policy)(problem, np.random.default_rng(request.seed))
    bottleneck, bound = _bound(plan)
    return PipelinePlanResponse(
        model=request.model, policy=plan.policy, dispatcher=problem.dispatcher,
        segments=chain.n_segments, stages=_stages(problem, plan), bottleneck_s=bottleneck,
        throughput_bound_rps=bound, decided_in_s=time.perf_counter() - started)


# the pipeline job
def _check(spec: PipelineJobSpec, cluster: Cluster) -> None:
    """Plan now, so that a spec no plan fits is refused at once (milliseconds; a workload's
    dry run first, which builds its network: the manager runs this in its planning child)."""
    check_serving(spec)
    _planned(spec, cluster, job_workload)


def _planned(spec: PipelineJobSpec, cluster: Cluster, load: Callable[[PipelineJobSpec],
             JobWorkload]) -> tuple[PipelineProblem, PipelinePlan, JobWorkload | None]:
    """The job's problem and the policy's plan; with a workload, ``load(spec)`` dry-runs and
    traces it (the job's planning runs it under the manager's limits)."""
    dispatcher = _dispatcher_device(cluster, spec.dispatcher)
    if spec.workload is None:
        served = None
        problem = cluster_problem(cluster, _chain(serving_model(spec.seed)), spec.devices,
                                  dispatcher, spec.memory_cap_mb)
    else:
        served = load(spec)
        problem = job_problem(cluster, served.chain, spec, dispatcher)
    return problem, get_policy(spec.policy)(problem, np.random.default_rng(spec.seed)), served


def _plan(spec: PipelineJobSpec, ctx: JobContext) -> Planned:
    problem, plan, served = _planned(spec, ctx.cluster,
                                     lambda s: ctx.limited(job_workload, s))
    stages = _stages(problem, plan)
    bottleneck, bound = _bound(plan)
    view: dict[str, Any] = {
        "model": SERVED_MODEL if served is None else served.workload.label,
        "policy": plan.policy, "dispatcher": problem.dispatcher, "cuts": list(plan.cuts),
        "bottleneck_s": bottleneck, "throughput_bound_rps": bound,
        "tables": [{"title": "stages: which device runs which layers",
                    "columns": ["stage", "device", "layers", "memory (bytes)",
                                "sends (bytes)"],
                    "rows": [[s.stage, s.device, f"{s.first}..{s.end - 1}",
                              s.memory_bytes, s.output_bytes] for s in stages]}]}
    if spec.workload is not None and served is not None:
        view["workload"] = {"model": spec.workload.model, "data": spec.workload.data,
                            "segments": served.chain.n_segments}
    return Planned(view, (problem, plan, served))


def _execute(spec: PipelineJobSpec, planned: Planned, ctx: JobContext) -> dict[str, Any]:
    problem, plan, served = planned.payload
    if served is not None:
        return execute_workload(spec, problem, plan, served, ctx)
    devices = [problem.nodes[i] for i in plan.nodes]
    images = digits_split(seed=spec.seed)[1].x
    own = OwnStream(itertools.cycle(images[i:i + 1] for i in range(len(images))),
                    spec.requests, spec.serve_seconds, spec.switch_after, spec.seed + 1)
    server = PipelineServer()
    dispatcher = Dispatcher(ctx.runtime, serving_model(spec.seed), devices, plan.cuts,
                            dispatcher_device=problem.dispatcher, window=spec.window,
                            codec=ActivationCodec("none"))
    ctx.publish(server)
    try:
        return serve(dispatcher, tuple(plan.cuts), server, own, ctx, serving_model)
    finally:
        server.close("the pipeline job ended")
        ctx.publish(None)
        dispatcher.close()


def _example(cluster: Cluster) -> dict[str, Any]:
    """150 images, a model switch half-way, 3 s of serving; on a cluster with 4 devices or
    more, each device offers 0.14 MB so that the CNN is cut into stages on three of them."""
    cap = 0.14 if len(cluster.devices) >= 4 else None
    return PipelineJobSpec(memory_cap_mb=cap, requests=150, serve_seconds=3.0,
                           switch_after=75).model_dump(mode="json")


PIPELINE_KIND = JobKind(
    name="pipeline", spec=PipelineJobSpec, example=_example, plan=_plan, execute=_execute,
    check=_check,
    description="SEIFER pipelined inference: cut the digits CNN (or the workload's model), "
                "place its stages on devices, stream requests in order, switch models "
                "without dropping any")


def _server(context: ApiContext, job_id: str) -> PipelineServer:
    found = context.live.get(job_id)
    if isinstance(found, NotServing):
        raise HTTPException(status.HTTP_409_CONFLICT, detail=f"job {job_id!r}: {found.reason}")
    if not isinstance(found, PipelineServer):
        raise HTTPException(status.HTTP_409_CONFLICT,
                            detail=f"job {job_id!r} is not a pipeline that is serving now")
    return found


def router(context: ApiContext) -> APIRouter:
    """``/pipeline/plan`` and the serving routes of running pipeline jobs."""
    routes = APIRouter(tags=["pipeline"])

    @routes.post("/pipeline/plan")
    def plan(request: PipelinePlanRequest) -> PipelinePlanResponse:
        """Cut a model into stages and place them (SEIFER §3) on this cluster or a random
        one; 422 if no plan fits, 413 past the planning limits."""
        if context.cluster is None and request.on == "cluster":
            raise ConfigError("this manager has no cluster; plan on a random one", field="on")
        return context.limited(plan_request, request, context.cluster)

    @routes.post("/pipelines/{job_id}/infer")
    def infer(job_id: JobId, request: InferRequest) -> InferResponse:
        """Classify images through a running pipeline job; results in request order; 409
        if the job is not serving (or is full)."""
        inputs = np.asarray(request.inputs, np.float32).reshape(-1, 1, 1, 8, 8)
        try:
            results = _server(context, job_id).infer(inputs, request.timeout_s)
        except PipelineBusy as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from None
        outputs = [r.output.reshape(-1) for r in results]
        return InferResponse(outputs=[o.tolist() for o in outputs],
                             classes=[int(np.argmax(o)) for o in outputs],
                             versions=[r.version for r in results],
                             latency_s=[r.latency_s for r in results])

    @routes.post("/pipelines/{job_id}/switch", status_code=status.HTTP_202_ACCEPTED)
    def switch(job_id: JobId, request: SwitchRequest) -> dict[str, Any]:
        """Switch a serving pipeline to new weights at its next batch (SEIFER §4.4's
        model watch: the old stages drain first, no request is dropped)."""
        try:
            _server(context, job_id).switch(request.seed)
        except PipelineBusy as exc:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from None
        return {"job": job_id, "seed": request.seed}

    return routes


API = ProblemApi("pipeline", router, kinds=(PIPELINE_KIND,))
"""SEIFER's offer to the manager (entry point ``edgewise.problems``)."""
