"""The manager's Okita endpoints: simulate a policy on a scenario, or return its schedule."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.errors import ConfigError
from edgewise.runtime.jobs import ProblemApi
from edgewise.sites.problem import SitesProblem
from edgewise.sites.scenario import default_scenario, scenario_from_dict
from edgewise.sites.sim import simulate

__all__ = [
    "API", "MAX_SITES",
    "GeneratorSpec",
    "PlanEntry",
    "PlanResponse",
    "ScenarioBody",
    "SimulateResponse",
    "SitesRequest",
    "build_sites_router",
    "plan_request",
    "simulate_request",
    "sites_router",
]

MAX_SITES = 64
MAX_JOBS = 256
MAX_HORIZON = 500
MAX_CHUNKS = 10_000
OFFLINE_OPT_MAX_SIZE = 4 * 4 * 12
"""offline-opt solves a MILP: at most sites x jobs x horizon = 4 x 4 x 12 over HTTP."""

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
Name = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Amount = Annotated[float, Field(ge=0, le=1e6)]
Positive = Annotated[float, Field(gt=0, le=1e6)]
Chunks = Annotated[int, Field(ge=0, le=MAX_CHUNKS)]
PolicyName = Literal["okita", "fifo", "drf", "oasis", "offline-opt"]


class SiteBody(BaseModel):
    """Site r: capacities C_r^k (GPUs, vCPUs, GB RAM, GB disk)."""

    model_config = _STRICT
    name: Name
    gpu: Amount
    cpu: Amount
    mem_gb: Amount
    disk_gb: Amount


class DemandBody(BaseModel):
    """A worker's m_i^k or a parameter server's n_i^k."""

    model_config = _STRICT
    gpu: Amount = 0.0
    cpu: Amount
    mem_gb: Amount
    disk_gb: Amount


class LatencyBody(BaseModel):
    """f_i: exponential τ e^{rate t} (default), linear τ t + b, piecewise τ / τ2 at c."""

    model_config = _STRICT
    kind: Literal["exponential", "linear", "piecewise"] = "exponential"
    tau: Amount = 50.0
    rate: Annotated[float, Field(ge=0, le=5)] = 0.25
    b: Amount = 0.0
    tau2: Amount = 0.0
    c: Annotated[float, Field(ge=0, le=MAX_HORIZON)] = 0.0


class JobBody(BaseModel):
    """Job i: arrival a_i, chunks D_i^r per site, E_i, ρ_i, δ_i, π_i, demands, f_i."""

    model_config = _STRICT
    name: Name
    arrival: Annotated[int, Field(ge=0, lt=MAX_HORIZON)]
    data: list[Chunks] = Field(min_length=1, max_length=MAX_SITES)
    epochs: Annotated[int, Field(ge=1, le=1000)]
    rho: Positive
    chunk_mb: Positive
    param_mb: Amount
    worker: DemandBody
    ps: DemandBody
    latency: LatencyBody = Field(default_factory=LatencyBody)


class ScenarioBody(BaseModel):
    """A scenario as in a YAML file (see docs/okita.md), bounded for HTTP."""

    model_config = _STRICT
    horizon: Annotated[int, Field(ge=1, le=MAX_HORIZON)]
    sites: list[SiteBody] = Field(min_length=1, max_length=MAX_SITES)
    bandwidth_cost: list[list[Amount]] = Field(min_length=1, max_length=MAX_SITES)
    jobs: list[JobBody] = Field(min_length=1, max_length=MAX_JOBS)
    alpha: list[Amount] = Field(default=[1.0, 1.0], min_length=2, max_length=2)
    beta: list[Amount] = Field(default=[1.0, 1.0, 1.0], min_length=3, max_length=3)


class GeneratorSpec(BaseModel):
    """The §V-B generator's knobs (smaller bounds than the CLI's)."""

    model_config = _STRICT
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    n_sites: Annotated[int, Field(ge=1, le=MAX_SITES)] = 50
    n_jobs: Annotated[int, Field(ge=1, le=MAX_JOBS)] = 100
    horizon: Annotated[int, Field(ge=1, le=MAX_HORIZON)] = 150
    latency: Literal["exponential", "linear", "piecewise"] = "exponential"


class SitesRequest(BaseModel):
    """A scenario (or the generator's settings) and the policy to schedule it with."""

    model_config = _STRICT
    scenario: ScenarioBody | None = None
    generator: GeneratorSpec | None = None
    policy: PolicyName = "okita"
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0

    @model_validator(mode="after")
    def _one_source(self) -> SitesRequest:
        if (self.scenario is None) == (self.generator is None):
            raise ValueError("give exactly one of scenario and generator")
        return self


class SimulateResponse(BaseModel):
    policy: str
    total_cost: float
    latency_cost: float
    data_transfer_cost: float
    parameter_exchange_cost: float
    makespan: int
    completion: dict[str, int | None]
    unfinished: list[str]
    slots_run: int
    policy_seconds: float


class PlanEntry(BaseModel):
    slot: int
    job: str
    workers: dict[str, int]
    ps_site: str
    transfers: list[dict[str, Any]]


class PlanResponse(BaseModel):
    policy: str
    entries: list[PlanEntry]
    completion: dict[str, int | None]
    solver_seconds: float


def _problem(request: SitesRequest) -> SitesProblem:
    """The request's problem; ConfigError (422) if it is invalid or too big for offline-opt."""
    if request.scenario is not None:
        problem = scenario_from_dict(request.scenario.model_dump(mode="python"), "request")
    else:
        g = request.generator
        assert g is not None  # the validator guarantees one source
        problem = default_scenario(g.seed, n_sites=g.n_sites, n_jobs=g.n_jobs,
                                   horizon=g.horizon, latency=g.latency)
    size = problem.n_sites * len(problem.jobs) * problem.horizon
    if request.policy == "offline-opt" and size > OFFLINE_OPT_MAX_SIZE:
        raise ConfigError(f"offline-opt is exact and limited to sites x jobs x horizon <= "
                          f"{OFFLINE_OPT_MAX_SIZE} here, got {size}", field="policy")
    return problem


def simulate_request(request: SitesRequest) -> SimulateResponse:
    """Simulate the request's policy on its scenario."""
    result = simulate(_problem(request), request.policy, seed=request.seed)
    return SimulateResponse(
        policy=result.policy, total_cost=result.total_cost, latency_cost=result.cost.latency,
        data_transfer_cost=result.cost.data_transfer,
        parameter_exchange_cost=result.cost.parameter_exchange, makespan=result.makespan,
        completion=dict(result.completion), unfinished=list(result.unfinished),
        slots_run=result.slots_run, policy_seconds=result.timings["decision_seconds"])


def plan_request(request: SitesRequest) -> PlanResponse:
    """The request's policy's per-slot schedule, with site names."""
    problem = _problem(request)
    names = [s.name for s in problem.sites]
    started = time.perf_counter()
    result = simulate(problem, request.policy, seed=request.seed)
    entries = [PlanEntry(
        slot=e.slot, job=e.job, ps_site=names[e.ps_site],
        workers={names[r]: y for r, y in enumerate(e.workers) if y},
        transfers=[{"from": names[g.src], "to": names[g.dst], "chunks": g.chunks}
                   for g in e.transfers if g.chunks])
        for e in result.plan.entries]
    return PlanResponse(policy=result.policy, entries=entries,
                        completion=dict(result.plan.completion),
                        solver_seconds=time.perf_counter() - started)


def build_sites_router() -> APIRouter:
    """A fresh Okita router; :data:`sites_router` is one (mount it with
    ``create_app(..., routers=[sites_router])``)."""
    router = APIRouter(prefix="/sites", tags=["okita"])

    @router.post("/simulate")
    def simulate_route(request: SitesRequest) -> SimulateResponse:
        """Total cost (latency + bandwidth), makespan and completions of a policy; 422 for
        an invalid scenario."""
        return simulate_request(request)

    @router.post("/plan")
    def plan_route(request: SitesRequest) -> PlanResponse:
        """A policy's per-slot schedule: workers and PS per site, chunks trained where."""
        return plan_request(request)

    return router


sites_router = build_sites_router()
"""The Okita endpoints, ``/sites/simulate`` and ``/sites/plan``, for ``create_app``."""


API = ProblemApi("sites", lambda ctx: build_sites_router())
"""Okita's offer to the manager (entry point ``edgewise.problems``)."""
