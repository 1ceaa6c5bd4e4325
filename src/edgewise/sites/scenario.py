"""Okita scenarios: YAML files validated with pydantic, and the seeded §V-B generator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgewise.cluster.schema import read_yaml
from edgewise.errors import ConfigError, config_error
from edgewise.sites.problem import Job, LatencyCost, SiteSpec, SitesProblem, hostable

__all__ = [
    "EC2_SITES",
    "default_scenario",
    "load_scenario",
    "problem_to_dict",
    "scenario_from_dict",
    "tiny_scenario",
]

# (name, GPUs, vCPUs, GB RAM, GB disk): Amazon EC2 P3, P2 and G3 instances (§V-B, [43]).
EC2_SITES: tuple[tuple[str, float, float, float, float], ...] = (
    ("p3.2xlarge", 1, 8, 61, 500), ("p3.8xlarge", 4, 32, 244, 1000),
    ("p3.16xlarge", 8, 64, 488, 2000), ("p2.xlarge", 1, 4, 61, 500),
    ("p2.8xlarge", 8, 32, 488, 1000), ("p2.16xlarge", 16, 64, 732, 2000),
    ("g3.4xlarge", 1, 16, 122, 500), ("g3.8xlarge", 2, 32, 244, 1000),
    ("g3.16xlarge", 4, 64, 488, 2000),
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SiteIn(_Model):
    name: str
    gpu: float = Field(ge=0)
    cpu: float = Field(ge=0)
    mem_gb: float = Field(ge=0)
    disk_gb: float = Field(ge=0)


class DemandIn(_Model):
    gpu: float = Field(0, ge=0)
    cpu: float = Field(ge=0)
    mem_gb: float = Field(ge=0)
    disk_gb: float = Field(ge=0)


class LatencyIn(_Model):
    kind: Literal["exponential", "linear", "piecewise"] = "exponential"
    tau: float = Field(default=50.0, ge=0)
    rate: float = Field(default=0.25, ge=0)
    b: float = 0.0
    tau2: float = 0.0
    c: float = 0.0


class JobIn(_Model):
    name: str
    arrival: int = Field(ge=0)
    data: list[int]
    epochs: int = Field(ge=1)
    rho: float = Field(gt=0)
    chunk_mb: float = Field(gt=0)
    param_mb: float = Field(ge=0)
    worker: DemandIn
    ps: DemandIn
    latency: LatencyIn = Field(default_factory=LatencyIn)
    workload: str | None = Field(
        default=None, min_length=1, max_length=4096,
        description="a workload YAML that `sites run` trains for this job (relative to the "
                    "scenario file); default: the digits CNN on digits")


class ScenarioIn(_Model):
    horizon: int = Field(ge=1)
    sites: list[SiteIn] = Field(min_length=1)
    bandwidth_cost: list[list[float]] = Field(description="q^{rr'} per MB")
    jobs: list[JobIn]
    alpha: tuple[float, float] = (1.0, 1.0)
    beta: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def to_problem(self) -> SitesProblem:
        sites = tuple(SiteSpec(s.name, (s.gpu, s.cpu, s.mem_gb, s.disk_gb)) for s in self.sites)
        jobs = tuple(
            Job(j.name, j.arrival, tuple(j.data), j.epochs, _demand(j.worker), _demand(j.ps),
                j.rho, j.chunk_mb, j.param_mb, LatencyCost(**j.latency.model_dump()),
                j.workload)
            for j in self.jobs)
        q = tuple(tuple(row) for row in self.bandwidth_cost)
        return SitesProblem(sites, q, jobs, self.horizon, self.alpha, self.beta)


def _demand(d: DemandIn) -> tuple[float, float, float, float]:
    return (float(d.gpu), float(d.cpu), float(d.mem_gb), float(d.disk_gb))


def scenario_from_dict(data: Any, source: str = "<dict>",
                       base: Path | None = None) -> SitesProblem:
    """Validate a parsed scenario; ConfigError names the source, the field and the problem.
    A job's relative ``workload`` path is taken from ``base`` (the file's folder) when
    given."""
    if not isinstance(data, dict):
        raise ConfigError("the file must hold a mapping (horizon:, sites:, ...)", source=source)
    try:
        parsed = ScenarioIn.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, source) from None
    try:
        problem = parsed.to_problem()
    except ConfigError as exc:
        raise ConfigError(exc.problem, source=source, field=exc.field) from None
    return problem if base is None else _workloads_from(problem, base)


def _workloads_from(problem: SitesProblem, base: Path) -> SitesProblem:
    jobs = tuple(replace(j, workload=str(base / j.workload)) if j.workload is not None
                 and not Path(j.workload).is_absolute() else j for j in problem.jobs)
    return replace(problem, jobs=jobs)


def load_scenario(path: str | Path) -> SitesProblem:
    """Read and validate a scenario YAML file."""
    return scenario_from_dict(read_yaml(path), source=str(path), base=Path(path).parent)


def problem_to_dict(problem: SitesProblem) -> dict[str, Any]:
    """The scenario document of ``problem`` (round-trips through scenario_from_dict)."""
    def demand(v: tuple[float, ...]) -> dict[str, float]:
        return dict(zip(("gpu", "cpu", "mem_gb", "disk_gb"), v, strict=True))
    return {
        "horizon": problem.horizon, "alpha": list(problem.alpha), "beta": list(problem.beta),
        "sites": [{"name": s.name, **demand(s.capacity)} for s in problem.sites],
        "bandwidth_cost": [list(row) for row in problem.q],
        "jobs": [{
            "name": j.name, "arrival": j.arrival, "data": list(j.data), "epochs": j.epochs,
            "rho": j.rho, "chunk_mb": j.chunk_mb, "param_mb": j.param_mb,
            "worker": demand(j.worker_demand), "ps": demand(j.ps_demand),
            "latency": {"kind": j.latency.kind, "tau": j.latency.tau, "rate": j.latency.rate,
                        "b": j.latency.b, "tau2": j.latency.tau2, "c": j.latency.c},
            **({} if j.workload is None else {"workload": j.workload}),
        } for j in problem.jobs],
    }


def _latency(rng: np.random.Generator, kind: str) -> LatencyCost:
    """§V-B: τ e^{0.25t}, τ∈[20,100]; τt+b, b∈[50,200]; τ1∈[20,100], τ2∈[300,400], c∈[3,5]."""
    tau = float(rng.uniform(20, 100))
    if kind == "linear":
        return LatencyCost("linear", tau, b=float(rng.uniform(50, 200)))
    if kind == "piecewise":
        return LatencyCost("piecewise", tau, tau2=float(rng.uniform(300, 400)),
                           c=float(rng.integers(3, 6)))
    return LatencyCost("exponential", tau, rate=0.25)


def _job(rng: np.random.Generator, i: int, n_sites: int, arrival: int, kind: str) -> Job:
    """§V-B demands: worker 0-4 GPUs, 1-10 vCPUs, 2-32 GB, 5-10 GB disk; PS the same without
    GPUs; D_i^r ∈ [10,20]; δ_i ∈ [20,60] MB; ρ_i/E_i ∈ [5,15]; π_i ∈ [30,575] MB."""
    worker = (float(rng.integers(0, 5)), float(rng.integers(1, 11)),
              float(rng.integers(2, 33)), float(rng.integers(5, 11)))
    ps = (0.0, float(rng.integers(1, 11)), float(rng.integers(2, 33)), float(rng.integers(5, 11)))
    epochs = int(rng.integers(20, 31))  # E_i as in the testbed (§V-A); only ρ_i/E_i matters
    rho = float(epochs * int(rng.integers(5, 16)))
    data = tuple(int(v) for v in rng.integers(10, 21, size=n_sites))
    return Job(f"job-{i}", arrival, data, epochs, worker, ps, rho,
               float(rng.integers(20, 61)), float(rng.integers(30, 576)), _latency(rng, kind))


def default_scenario(seed: int = 0, *, n_sites: int = 50, n_jobs: int = 100,
                     horizon: int = 150, latency: str = "exponential",
                     arrival_window: int | None = None,
                     alpha: tuple[float, float] = (1.0, 1.0),
                     beta: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> SitesProblem:
    """The §V-B simulation: R = 50 sites drawn from EC2 P3/P2/G3 capacities, T = 150 slots,
    I = 100 jobs arriving uniformly at random over the first ``arrival_window`` slots (default
    the whole horizon: "100 jobs arrive randomly"), q^{rr'} ∈ [2,8] per 100 MB."""
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, len(EC2_SITES), size=n_sites)
    sites = tuple(SiteSpec(f"site-{r}-{EC2_SITES[k][0]}", EC2_SITES[k][1:])
                  for r, k in enumerate(kinds))
    upper = rng.uniform(2, 8, size=(n_sites, n_sites)) / 100.0
    sym = np.triu(upper, 1) + np.triu(upper, 1).T
    q = tuple(tuple(float(v) for v in row) for row in sym)
    window = arrival_window or horizon
    arrivals = np.sort(rng.integers(0, min(window, horizon), size=n_jobs))
    jobs = tuple(_hostable_job(rng, sites, i, int(a), latency) for i, a in enumerate(arrivals))
    return SitesProblem(sites, q, jobs, horizon, alpha, beta)


def _hostable_job(rng: np.random.Generator, sites: tuple[SiteSpec, ...], i: int, arrival: int,
                  kind: str) -> Job:
    """A §V-B job, redrawn (same stream) until one worker and the PS fit on the sites."""
    while True:
        job = _job(rng, i, len(sites), arrival, kind)
        if hostable(job, sites):
            return job


def _tiny_job(rng: np.random.Generator, i: int, arrival: int, n_sites: int,
              latency: str) -> Job:
    """One job of :func:`tiny_scenario` (its ranges in that docstring)."""
    epochs = int(rng.integers(20, 31))
    data = [int(v) for v in rng.integers(0, 5, size=n_sites)]
    data[i % n_sites] = max(data[i % n_sites], 1)  # every job has some data
    return Job(
        f"job-{i}", arrival, tuple(data), epochs,
        (float(rng.integers(0, 3)), float(rng.integers(1, 9)), float(rng.integers(2, 33)),
         float(rng.integers(5, 11))),
        (0.0, float(rng.integers(1, 9)), float(rng.integers(2, 33)),
         float(rng.integers(5, 11))),
        float(epochs * int(rng.integers(2, 5))), float(rng.integers(20, 61)),
        float(rng.integers(30, 576)), _latency(rng, latency))


def tiny_scenario(seed: int = 0, *, n_sites: int = 3, n_jobs: int = 3, horizon: int = 6,
                  latency: str = "exponential") -> SitesProblem:
    """A small instance for the exact offline optimum: §V-B's cost, demand and latency
    ranges, with fewer chunks (D_i^r ∈ [0, 4], ρ_i/E_i ∈ [2, 4]) and sites of a quarter of
    a p3.8xlarge to a p3.8xlarge, so resources conflict; arrivals in the first T/2 slots. A
    job that no site can host (one worker and the PS) is redrawn from the same stream."""
    rng = np.random.default_rng(seed)
    sites = tuple(SiteSpec(f"site-{r}", (float(rng.integers(1, 5)), float(rng.integers(8, 33)),
                                         float(rng.integers(61, 245)), 1000.0))
                  for r in range(n_sites))
    upper = rng.uniform(2, 8, size=(n_sites, n_sites)) / 100.0
    sym = np.triu(upper, 1) + np.triu(upper, 1).T
    q = tuple(tuple(float(v) for v in row) for row in sym)
    arrivals = np.sort(rng.integers(0, max(1, horizon // 2), size=n_jobs))
    jobs = []
    for i, a in enumerate(arrivals):
        job = _tiny_job(rng, i, int(a), n_sites, latency)
        while not hostable(job, sites):  # redrawn from the same stream (about 1 % of seeds)
            job = _tiny_job(rng, i, int(a), n_sites, latency)
        jobs.append(job)
    return SitesProblem(sites, q, tuple(jobs), horizon)
