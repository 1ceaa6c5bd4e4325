"""Request and response bodies of the Okita endpoints and the ``sites`` job spec
(pydantic, at the edge), every size bounded."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.jobs.workload import HttpWorkload

__all__ = [
    "MAX_SITES", "MAX_SIZE", "OFFLINE_OPT_MAX_SIZE", "GeneratorSpec", "PlanEntry", "PlanResponse",
    "ScenarioBody", "SimulateResponse", "SitesJobSpec", "SitesRequest",
]  # fmt: skip

MAX_SITES = 64
MAX_JOBS = 256
MAX_HORIZON = 500
MAX_CHUNKS = 10_000
OFFLINE_OPT_MAX_SIZE = 4 * 4 * 12
"""offline-opt solves a MILP: at most sites x jobs x horizon = 4 x 4 x 12 over HTTP."""
MAX_SIZE = 50 * 100 * 150
"""Sites x jobs x horizon of one request: the §V-B simulation's size; larger generated
scenarios took minutes of CPU."""


def _check_size(sites: int, jobs: int, horizon: int) -> None:
    if sites * jobs * horizon > MAX_SIZE:
        raise ValueError(f"sites x jobs x horizon must be at most {MAX_SIZE} (the problem's "
                         f"size), got {sites * jobs * horizon}")

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
    workload: HttpWorkload | None = Field(
        default=None, description="what a sites job trains for this job (default: the job "
                                  "spec's workload, else the digits CNN on digits); "
                                  "simulate and plan ignore it")


class ScenarioBody(BaseModel):
    """A scenario as in a YAML file (see docs/okita.md), bounded for HTTP."""

    model_config = _STRICT
    horizon: Annotated[int, Field(ge=1, le=MAX_HORIZON)]
    sites: list[SiteBody] = Field(min_length=1, max_length=MAX_SITES)
    bandwidth_cost: list[list[Amount]] = Field(min_length=1, max_length=MAX_SITES)
    jobs: list[JobBody] = Field(min_length=1, max_length=MAX_JOBS)
    alpha: list[Amount] = Field(default=[1.0, 1.0], min_length=2, max_length=2)
    beta: list[Amount] = Field(default=[1.0, 1.0, 1.0], min_length=3, max_length=3)

    @model_validator(mode="after")
    def _bounded(self) -> ScenarioBody:
        _check_size(len(self.sites), len(self.jobs), self.horizon)
        return self


class GeneratorSpec(BaseModel):
    """The §V-B generator's knobs (smaller bounds than the CLI's)."""

    model_config = _STRICT
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    n_sites: Annotated[int, Field(ge=1, le=MAX_SITES)] = 50
    n_jobs: Annotated[int, Field(ge=1, le=MAX_JOBS)] = 100
    horizon: Annotated[int, Field(ge=1, le=MAX_HORIZON)] = 150
    latency: Literal["exponential", "linear", "piecewise"] = "exponential"

    @model_validator(mode="after")
    def _bounded(self) -> GeneratorSpec:
        _check_size(self.n_sites, self.n_jobs, self.horizon)
        return self


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




class SitesJobSpec(BaseModel):
    """Multi-site training (Okita) for real: the scenario's jobs scheduled slot by slot by
    ``policy`` and trained on the cluster's sites (matched by name: a scenario site is the
    cluster site of the same name). Without a scenario, one built from the cluster's sites.
    ``epochs_per_slot`` overrides each job's E_i per slot (quicker runs). ``workload`` is
    what every job trains whose scenario entry names none (default: the digits CNN)."""

    model_config = _STRICT
    scenario: ScenarioBody | None = None
    workload: HttpWorkload | None = Field(
        default=None, description="the model and data every learning job trains (a job of "
                                  "the scenario may name its own); checked by a dry run at "
                                  "submission; default: the digits CNN on digits")
    policy: PolicyName = "okita"
    epochs_per_slot: int | None = Field(default=None, ge=1, le=100)
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
