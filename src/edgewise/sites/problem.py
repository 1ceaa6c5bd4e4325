"""The Okita problem (2): edge sites, online UDL jobs, and the per-slot schedule (Plan)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgewise.errors import ConfigError

__all__ = [
    "LATENCY_KINDS",
    "RESOURCES",
    "Job",
    "JobSlot",
    "LatencyCost",
    "Plan",
    "SiteSpec",
    "SitesProblem",
    "Transfer",
    "chunk_capacity",
    "hostable",
]

RESOURCES = ("gpu", "cpu", "mem_gb", "disk_gb")  # the K = 4 resource types, in this order
LATENCY_KINDS = ("exponential", "linear", "piecewise")


@dataclass(frozen=True, slots=True)
class SiteSpec:
    """A site r with capacities C_r^k in RESOURCES order (GPUs, vCPUs, GB RAM, GB disk)."""

    name: str
    capacity: tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class LatencyCost:
    """f_i(Δt) of §V-B for response time Δt (slots). ``exponential`` (the paper's "sigmoid",
    default): τ e^{rate·Δt}; ``linear``: τ Δt + b; ``piecewise``: τ if Δt < c else τ2."""

    kind: str = "exponential"
    tau: float = 50.0
    rate: float = 0.25
    b: float = 0.0
    tau2: float = 0.0
    c: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in LATENCY_KINDS:
            raise ConfigError(f"must be one of {', '.join(LATENCY_KINDS)}, got {self.kind!r}",
                              field="latency.kind")
        if self.tau < 0:
            raise ConfigError("must be >= 0", field="latency.tau")

    def __call__(self, dt: float) -> float:
        if self.kind == "exponential":
            return self.tau * math.exp(self.rate * dt)
        if self.kind == "linear":
            return self.tau * dt + self.b
        return self.tau if dt < self.c else self.tau2


@dataclass(frozen=True, slots=True)
class Job:
    """A UDL job i: arrival slot a_i, chunks D_i^r per site, epochs E_i, worker and PS demands
    m_i^k and n_i^k, worker capacity ρ_i (chunk-epochs per slot), chunk size δ_i (MB),
    parameter size π_i (MB exchanged per worker per slot) and latency cost f_i. ``workload``
    is what a real run trains (a workload YAML's path; None: the digits CNN on digits); the
    policies do not read it."""

    name: str
    arrival: int
    data: tuple[int, ...]
    epochs: int
    worker_demand: tuple[float, float, float, float]
    ps_demand: tuple[float, float, float, float]
    rho: float
    chunk_mb: float
    param_mb: float
    latency: LatencyCost = LatencyCost()
    workload: str | None = None

    @property
    def total_chunks(self) -> int:
        return sum(self.data)

    @property
    def chunks_per_worker(self) -> float:
        """ρ_i / E_i: chunks one worker trains for E_i epochs in a slot (constraint 2b)."""
        return self.rho / self.epochs


def chunk_capacity(job: Job, workers: int) -> int:
    """The most chunks y workers of ``job`` train in one slot at one site: ⌊ρ_i y / E_i⌋ (2b)."""
    return math.floor(job.rho * workers / job.epochs + 1e-9)


@dataclass(frozen=True, slots=True)
class SitesProblem:
    """Problem (2): sites, unit bandwidth costs q^{rr'} (per MB, q^{rr} = 0), jobs, horizon T,
    and the proportional factors α1:α2 of Eq. 4 and β1, β2, β3 of Eq. 6."""

    sites: tuple[SiteSpec, ...]
    q: tuple[tuple[float, ...], ...]
    jobs: tuple[Job, ...]
    horizon: int
    alpha: tuple[float, float] = (1.0, 1.0)
    beta: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:
        n = len(self.sites)
        if n < 1:
            raise ConfigError("need at least one site", field="sites")
        if len(self.q) != n or any(len(row) != n for row in self.q):
            raise ConfigError(f"must be a {n}x{n} matrix", field="bandwidth_cost")
        if any(self.q[r][r] != 0 for r in range(n)) or any(v < 0 for row in self.q for v in row):
            raise ConfigError("must be >= 0 with a zero diagonal", field="bandwidth_cost")
        if self.horizon < 1:
            raise ConfigError("must be at least 1", field="horizon")
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            raise ConfigError("job names must be unique", field="jobs")
        for i, job in enumerate(self.jobs):
            _check_job(job, i, n, self.horizon)
            if not hostable(job, self.sites):
                raise ConfigError("no site can host one worker and the PS",
                                  field=f"jobs[{i}].worker_demand")

    @property
    def n_sites(self) -> int:
        return len(self.sites)


def hostable(job: Job, sites: tuple[SiteSpec, ...]) -> bool:
    """Whether one worker and the PS fit somewhere (together, or on two sites)."""
    def fit(need: tuple[float, ...], site: SiteSpec) -> bool:
        return all(d <= c + 1e-9 for d, c in zip(need, site.capacity, strict=True))
    both = tuple(w + p for w, p in zip(job.worker_demand, job.ps_demand, strict=True))
    workers = [r for r, s in enumerate(sites) if fit(job.worker_demand, s)]
    ps = [r for r, s in enumerate(sites) if fit(job.ps_demand, s)]
    return any(fit(both, sites[r]) for r in workers) or \
        any(a != b for a in workers for b in ps)


def _check_job(job: Job, i: int, n_sites: int, horizon: int) -> None:
    where = f"jobs[{i}]"
    if len(job.data) != n_sites:
        raise ConfigError(f"needs one entry per site ({n_sites})", field=f"{where}.data")
    if any(d < 0 for d in job.data) or sum(job.data) < 1:
        raise ConfigError("chunks must be >= 0, at least one in all", field=f"{where}.data")
    if not 0 <= job.arrival < horizon:
        raise ConfigError(f"must be in [0, {horizon})", field=f"{where}.arrival")
    if job.epochs < 1 or job.rho < job.epochs:
        raise ConfigError("need epochs >= 1 and rho >= epochs (a worker trains a chunk)",
                          field=f"{where}.rho")
    if any(v < 0 for v in job.worker_demand + job.ps_demand):
        raise ConfigError("demands must be >= 0", field=f"{where}.worker_demand")
    if not any(v > 0 for v in job.worker_demand):
        raise ConfigError("a worker must demand some resource", field=f"{where}.worker_demand")


@dataclass(frozen=True, slots=True)
class Transfer:
    """g_i^{rr'}(t): ``chunks`` of site ``src``'s data trained at site ``dst`` in the slot
    (src == dst: local training, no bandwidth)."""

    src: int
    dst: int
    chunks: int


@dataclass(frozen=True, slots=True)
class JobSlot:
    """One job's decisions in one slot t: y_i^r(t) per site (problem.sites order), the PS
    site (s_i^r(t) = 1 there) and the data it trains g_i^{rr'}(t)."""

    job: str
    slot: int
    workers: tuple[int, ...]
    ps_site: int
    transfers: tuple[Transfer, ...]

    @property
    def chunks(self) -> int:
        return sum(g.chunks for g in self.transfers)


@dataclass(frozen=True, slots=True)
class Plan:
    """A schedule: the active (job, slot) entries, sorted by slot then job, and each job's
    completion slot t_i (the last slot with workers, Eq. 2e), or None if unfinished."""

    policy: str
    entries: tuple[JobSlot, ...]
    completion: dict[str, int | None]

    def for_slot(self, slot: int) -> tuple[JobSlot, ...]:
        return tuple(e for e in self.entries if e.slot == slot)

    def for_job(self, job: str) -> tuple[JobSlot, ...]:
        return tuple(e for e in self.entries if e.job == job)

    @property
    def n_slots(self) -> int:
        return max((e.slot for e in self.entries), default=-1) + 1
