"""The manager's Ekya endpoints (plan a window from given profiles, fetch plans) and its
``continual`` job: drifting streams retrained and served on one device of the cluster."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, HTTPException, status
from fastapi import Path as PathParam

from edgewise.cluster.model import Cluster, Role
from edgewise.continual.api_schemas import (
    ContinualJobSpec,
    ContinualPlanRequest,
    ContinualPlanResponse,
    DecisionView,
)
from edgewise.continual.policies import get_policy
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
)
from edgewise.continual.run import LiveProblem, RunSettings, WindowResult, execute
from edgewise.continual.workload import edge_models
from edgewise.errors import ConfigError
from edgewise.jobs import (
    ApiContext,
    JobContext,
    JobKind,
    Planned,
    ProblemApi,
    run_inline,
)
from edgewise.jobs.workload import HttpWorkload
from edgewise.nn.streams import digits_streams
from edgewise.nn.workload import Workload, resolved, validate

__all__ = ["API", "CONTINUAL_KIND", "MAX_KEPT_PLANS", "continual_router", "job_models",
           "plan_request"]

MAX_KEPT_PLANS = 64
PLAN_ID = r"^[0-9a-f]{32}$"


def _problem(req: ContinualPlanRequest) -> ContinualProblem:
    streams = tuple(
        StreamState(s.name, s.accuracy,
                    tuple(RetrainOption(o.config, o.accuracy, o.cost_s) for o in s.retrain),
                    tuple(InferenceOption(o.config, o.accuracy_factor, o.demand)
                          for o in s.inference))
        for s in req.streams)
    return ContinualProblem(streams, req.accelerators, req.window_s, req.delta, req.a_min)


def _decisions(plan: ContinualPlan) -> list[DecisionView]:
    return [DecisionView(stream=d.stream, retrain=d.retrain, inference=d.inference,
                         retrain_share=d.retrain_share, inference_share=d.inference_share)
            for d in plan.decisions]


def plan_request(req: ContinualPlanRequest) -> ContinualPlanResponse:
    """Plan a window with the request's policy (run by the manager's planning limiter)."""
    problem = _problem(req)
    start = time.perf_counter()
    plan = get_policy(req.policy)(problem, np.random.default_rng(req.seed))
    return ContinualPlanResponse(
        id=uuid.uuid4().hex, policy=req.policy, accuracy=plan.accuracy,
        violations=plan.violations, decided_in_s=time.perf_counter() - start,
        decisions=_decisions(plan))


def continual_router(context: ApiContext | None = None) -> APIRouter:
    """``/continual/plan`` and the plans it keeps (the last MAX_KEPT_PLANS)."""
    limited = context.limited if context is not None else run_inline
    router = APIRouter(prefix="/continual", tags=["continual"])
    lock, plans = threading.Lock(), OrderedDict[str, ContinualPlanResponse]()

    @router.post("/plan", status_code=status.HTTP_201_CREATED)
    def solve(req: ContinualPlanRequest) -> ContinualPlanResponse:
        """Plan a window with the chosen policy; 422 for an invalid or too large problem,
        413 past the planning limits."""
        view = limited(plan_request, req)
        with lock:
            plans[view.id] = view
            while len(plans) > MAX_KEPT_PLANS:
                plans.popitem(last=False)
        return view

    @router.get("/plans")
    def list_plans() -> list[ContinualPlanResponse]:
        """The kept plans, oldest first (at most MAX_KEPT_PLANS)."""
        with lock:
            return list(plans.values())

    @router.get("/plans/{plan_id}")
    def get_plan(plan_id: Annotated[str, PathParam(pattern=PLAN_ID)]) -> ContinualPlanResponse:
        """One plan by id; 404 if unknown or no longer kept."""
        with lock:
            found = plans.get(plan_id)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no plan {plan_id!r}")
        return found

    return router


# the continual job
def _device(spec: ContinualJobSpec, cluster: Cluster) -> str:
    if spec.device is not None:
        if spec.device not in cluster.device_names:
            raise ConfigError(f"no such device in the cluster: {spec.device!r}", field="device")
        return spec.device
    chosen = [d for d in cluster.devices if d.accelerator not in ("", "none")] or \
        list(cluster.with_role(Role.WORKER)) or list(cluster.devices)
    return chosen[0].name


def _under(prefix: str, field: str | None) -> str:
    """``field`` of a workload (``model``, or ``workload.model`` as the HTTP body names it)
    under the spec's field ``prefix``."""
    rest = (field or "model").removeprefix("workload.")
    return f"{prefix}.{rest}"


def _dry_run(http: HttpWorkload | None, seed: int, prefix: str,
             training: bool) -> Workload | None:
    """The workload checked by the workloads' dry run on the digits (the streams' frames)
    and resolved (input shape, classes); None for None."""
    if http is None:
        return None
    try:
        if http.data != "digits":
            raise ConfigError("the job's frames are its drifting digits streams: give data: "
                              "digits (the command line takes frame folders)", field="data")
        workload = http.to_workload()
        dry = validate(workload, seed=seed, training=training)
    except ConfigError as exc:
        raise ConfigError(exc.problem, field=_under(prefix, exc.field)) from None
    return resolved(workload, dry)


def _pair_field(field: str | None, golden_given: bool) -> str:
    """:func:`edge_models`'s field (``student.x``, ``golden.x``, ``golden``) as the spec's."""
    head, _, rest = (field or "").partition(".")
    if head == "golden" and golden_given:
        return "golden_workload" + (f".{rest}" if rest else "")
    if head == "golden":  # the built-in teacher outputs the digits' classes
        return "workload.classes"
    return _under("workload", rest or None)


def job_models(spec: ContinualJobSpec) -> tuple[Workload | None, Workload | None]:
    """The student's and the golden model's workloads (None: the built-in ones), each
    checked by the workloads' dry run, then the pair checked as ``edgewise continual run``
    checks it before Ray starts (:func:`edge_models`).

    Raises
    ------
    ConfigError
        Naming the ``workload.`` or ``golden_workload.`` field at fault.
    """
    student = _dry_run(spec.workload, spec.seed, "workload", training=True)
    golden = _dry_run(spec.golden_workload, spec.seed, "golden_workload", training=False)
    if student is not None or golden is not None:
        try:
            edge_models(student, golden, spec.seed)
        except ConfigError as exc:
            field = _pair_field(exc.field, golden is not None)
            raise ConfigError(exc.problem, field=field) from None
    return student, golden


def _check(spec: ContinualJobSpec, cluster: Cluster) -> None:
    _device(spec, cluster)
    job_models(spec)


def _workload_view(spec: ContinualJobSpec) -> dict[str, Any]:
    return {name: {"model": http.model, "data": http.data}
            for name, http in (("workload", spec.workload),
                               ("golden_workload", spec.golden_workload)) if http is not None}


def _plan(spec: ContinualJobSpec, ctx: JobContext) -> Planned:
    device = _device(spec, ctx.cluster)
    student, golden = ctx.limited(job_models, spec)  # builds the networks: not here
    view = {"device": device, "policy": spec.policy, "streams": spec.streams,
            "windows": spec.windows, "window_s": spec.window_s, **_workload_view(spec),
            "tables": []}
    return Planned(view, (device, student, golden))


def _window_table(result: WindowResult) -> dict[str, Any]:
    rows = [[d.stream, d.retrain or "-", round(d.retrain_share, 3), d.inference,
             round(d.inference_share, 3), round(result.accuracy.get(d.stream, 0.0), 3)]
            for d in result.plan.decisions]
    return {"title": f"window {result.index}: retraining and inference shares",
            "columns": ["stream", "retrain config", "retrain share", "inference config",
                        "inference share", "measured accuracy"], "rows": rows}


def _execute(spec: ContinualJobSpec, planned: Planned, ctx: JobContext) -> dict[str, Any]:
    settings = RunSettings(window_s=spec.window_s, seed=spec.seed, a_min=spec.a_min,
                           delta=spec.delta)
    streams = digits_streams(spec.streams, seed=spec.seed, n_windows=spec.windows)
    view, accuracies = dict(planned.view), []

    def progress(result: WindowResult) -> None:
        step = result.index + 1
        accuracies.append(result.mean_accuracy)
        ctx.metric("window_accuracy", result.mean_accuracy, step=step)
        ctx.metric("estimated_accuracy", result.plan.accuracy, step=step)
        view["tables"] = [*view["tables"], _window_table(result)]
        ctx.update_plan(view)
        ctx.event("replan", f"window {result.index}: measured accuracy "
                  f"{result.mean_accuracy:.3f}, {result.replans} re-plans",
                  window=result.index, retrained=result.retrained)
        ctx.progress(step / spec.windows, window=step, windows=spec.windows,
                     window_accuracy=result.mean_accuracy)
        ctx.check_stop()

    device, student, golden = planned.payload
    problem = LiveProblem(tuple(streams), spec.windows, settings, device=device,
                          student=student, golden=golden)
    execute(ctx.runtime, problem, spec.policy, progress=progress)
    return {"window": len(accuracies), "mean_accuracy": float(np.mean(accuracies))}


def _example(cluster: Cluster) -> dict[str, Any]:
    return ContinualJobSpec(streams=2, windows=2, window_s=2.0).model_dump(mode="json")


CONTINUAL_KIND = JobKind(
    name="continual", spec=ContinualJobSpec, example=_example, plan=_plan, execute=_execute,
    check=_check,
    description="Ekya continuous learning: drifting streams share one device; each window "
                "is micro-profiled and planned (retraining vs inference), then run")

API = ProblemApi("continual", continual_router, kinds=(CONTINUAL_KIND,))
"""Ekya's offer to the manager (entry point ``edgewise.problems``)."""
