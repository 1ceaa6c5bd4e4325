"""The manager's Ekya endpoints: solve a joint retraining/inference problem, fetch results."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, HTTPException, Request, status
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from edgewise.continual.policies import get_policy
from edgewise.continual.problem import (
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
)
from edgewise.runtime.jobs import ProblemApi

__all__ = [
    "API", "MAX_KEPT_PLANS", "ContinualPlanRequest", "ContinualPlanResponse", "continual_router",
]  # fmt: skip

MAX_STREAMS = 64
MAX_OPTIONS = 64
MAX_KEPT_PLANS = 64
PLAN_ID = r"^[0-9a-f]{32}$"

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{1,64}$")]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RetrainOptionSpec(BaseModel):
    """A micro-profiled retraining configuration: accuracy after it, cost at a whole
    accelerator in seconds."""

    model_config = _STRICT
    config: Name
    accuracy: Unit
    cost_s: float = Field(gt=0.0, le=1e7)


class InferenceOptionSpec(BaseModel):
    """An inference configuration: accuracy factor it keeps and share it needs."""

    model_config = _STRICT
    config: Name
    accuracy_factor: Unit
    demand: float = Field(gt=0.0, le=1e4)


class StreamSpec(BaseModel):
    model_config = _STRICT
    name: Name
    accuracy: Unit
    retrain: list[RetrainOptionSpec] = Field(default_factory=list, max_length=MAX_OPTIONS)
    inference: list[InferenceOptionSpec] = Field(min_length=1, max_length=MAX_OPTIONS)


class ContinualPlanRequest(BaseModel):
    """Algorithm 1's inputs (§4.1): streams, accelerators G, window ‖T‖, Δ and a_MIN."""

    model_config = _STRICT
    streams: list[StreamSpec] = Field(min_length=1, max_length=MAX_STREAMS)
    accelerators: float = Field(gt=0.0, le=1024.0)
    window_s: float = Field(gt=0.0, le=86_400.0)
    delta: float = Field(default=0.1, gt=0.0, le=1024.0)
    a_min: Unit = 0.0
    policy: Literal["thief", "uniform", "exact"] = "thief"
    seed: int = Field(default=0, ge=0, le=2**31)


class DecisionView(BaseModel):
    stream: str
    retrain: str | None
    inference: str
    retrain_share: float
    inference_share: float


class ContinualPlanResponse(BaseModel):
    id: str
    policy: str
    accuracy: float
    violations: int
    decisions: list[DecisionView]
    decided_in_s: float


def _problem(req: ContinualPlanRequest) -> ContinualProblem:
    streams = tuple(
        StreamState(s.name, s.accuracy,
                    tuple(RetrainOption(o.config, o.accuracy, o.cost_s) for o in s.retrain),
                    tuple(InferenceOption(o.config, o.accuracy_factor, o.demand)
                          for o in s.inference))
        for s in req.streams)
    return ContinualProblem(streams, req.accelerators, req.window_s, req.delta, req.a_min)


def _store(request: Request) -> tuple[threading.Lock, OrderedDict[str, ContinualPlanResponse]]:
    state = request.app.state
    if not hasattr(state, "continual_plans"):
        state.continual_plans = (threading.Lock(), OrderedDict())
    found: tuple[threading.Lock, OrderedDict[str, ContinualPlanResponse]] = \
        state.continual_plans
    return found


continual_router = APIRouter(prefix="/continual", tags=["continual"])


@continual_router.post("/plan", status_code=status.HTTP_201_CREATED)
def solve(req: ContinualPlanRequest, request: Request) -> ContinualPlanResponse:
    """Plan a window with the chosen policy; 422 for an invalid problem. The exact oracle
    is refused above 4 streams (it is exponential)."""
    if req.policy == "exact" and len(req.streams) > 4:
        raise HTTPException(422, detail="exact is limited to 4 streams")
    problem = _problem(req)
    start = time.perf_counter()
    plan = get_policy(req.policy)(problem, np.random.default_rng(req.seed))
    elapsed = time.perf_counter() - start
    view = ContinualPlanResponse(
        id=uuid.uuid4().hex, policy=req.policy, accuracy=plan.accuracy,
        violations=plan.violations, decided_in_s=elapsed,
        decisions=[DecisionView(stream=d.stream, retrain=d.retrain, inference=d.inference,
                                retrain_share=d.retrain_share,
                                inference_share=d.inference_share) for d in plan.decisions])
    lock, plans = _store(request)
    with lock:
        plans[view.id] = view
        while len(plans) > MAX_KEPT_PLANS:
            plans.popitem(last=False)
    return view


@continual_router.get("/plans")
def list_plans(request: Request) -> list[ContinualPlanResponse]:
    """The kept plans, oldest first (at most MAX_KEPT_PLANS)."""
    lock, plans = _store(request)
    with lock:
        return list(plans.values())


@continual_router.get("/plans/{plan_id}")
def get_plan(plan_id: Annotated[str, PathParam(pattern=PLAN_ID)],
             request: Request) -> ContinualPlanResponse:
    """One plan by id; 404 if unknown or no longer kept."""
    lock, plans = _store(request)
    with lock:
        found = plans.get(plan_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no plan {plan_id!r}")
    return found


API = ProblemApi("continual", lambda ctx: continual_router)
"""Ekya's offer to the manager (entry point ``edgewise.problems``)."""
