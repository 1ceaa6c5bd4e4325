"""The manager's Okita endpoints (simulate a policy on a scenario, or return its schedule)
and its ``sites`` job: a scenario's jobs scheduled slot by slot and trained on the
cluster's sites, with migrations and data moves as events."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.jobs import (
    JobContext,
    JobKind,
    Limiter,
    Planned,
    ProblemApi,
    run_inline,
)
from edgewise.sites.api_schemas import (
    OFFLINE_OPT_MAX_SIZE,
    PlanEntry,
    PlanResponse,
    ScenarioBody,
    SimulateResponse,
    SitesJobSpec,
    SitesRequest,
)
from edgewise.sites.api_workload import check_workloads, job_workloads
from edgewise.sites.problem import SitesProblem
from edgewise.sites.run import SiteRunConfig, SlotRecord, execute
from edgewise.sites.scenario import default_scenario, scenario_from_dict
from edgewise.sites.sim import plan_schedule, simulate
from edgewise.sites.sitemap import site_devices

__all__ = ["API", "SITES_KIND", "build_sites_router", "cluster_scenario", "plan_request",
           "scenario_problem", "simulate_request"]


def scenario_problem(body: ScenarioBody, source: str) -> SitesProblem:
    """The body's problem; its jobs' HTTP workloads stay in the body (they are built and
    checked by :mod:`edgewise.sites.api_workload`, never read as file paths)."""
    doc = body.model_dump(mode="python", exclude={"jobs": {"__all__": {"workload"}}})
    return scenario_from_dict(doc, source)


def _problem(request: SitesRequest) -> SitesProblem:
    """The request's problem; ConfigError (422) if it is invalid or too big for offline-opt."""
    if request.scenario is not None:
        problem = scenario_problem(request.scenario, "request")
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


def build_sites_router(limited: Limiter = run_inline) -> APIRouter:
    """The Okita router: ``/sites/simulate`` and ``/sites/plan`` (run through ``limited``)."""
    router = APIRouter(prefix="/sites", tags=["okita"])

    @router.post("/simulate")
    def simulate_route(request: SitesRequest) -> SimulateResponse:
        """Total cost (latency + bandwidth), makespan and completions of a policy; 422 for
        an invalid scenario, 413 past the planning limits."""
        return limited(simulate_request, request)

    @router.post("/plan")
    def plan_route(request: SitesRequest) -> PlanResponse:
        """A policy's per-slot schedule: workers and PS per site, chunks trained where."""
        return limited(plan_request, request)

    return router


# the sites job
def cluster_scenario(cluster: Cluster) -> ScenarioBody:
    """A small scenario on the cluster's sites: each site offers one actor per compute
    device (its first device stores data), and one job per site starts with 6 data chunks
    there, 2 epochs, its workers and parameter server taking one device each."""
    if not cluster.sites:
        raise ConfigError("the cluster has no sites; give a scenario", field="scenario")
    sites, jobs = [], []
    n = len(cluster.sites)
    for r, site in enumerate(cluster.sites):
        compute = max(1, len(site.devices) - 1)
        sites.append({"name": site.name, "gpu": 0.0, "cpu": float(compute),
                      "mem_gb": float(compute), "disk_gb": float(compute)})
        data = [6 if k == r else 0 for k in range(n)]
        jobs.append({"name": f"digits-{site.name}", "arrival": 0, "data": data, "epochs": 2,
                     "rho": 6.0, "chunk_mb": 1.0, "param_mb": 0.2,
                     "worker": {"cpu": 1.0, "mem_gb": 1.0, "disk_gb": 1.0},
                     "ps": {"cpu": 1.0, "mem_gb": 1.0, "disk_gb": 1.0}})
    cost = [[0.0 if a == b else 0.03 for b in range(n)] for a in range(n)]
    return ScenarioBody.model_validate({"horizon": 6, "sites": sites, "bandwidth_cost": cost,
                                        "jobs": jobs})


def _scenario(spec: SitesJobSpec, cluster: Cluster) -> SitesProblem:
    return scenario_problem(spec.scenario or cluster_scenario(cluster), "scenario")


def _check(spec: SitesJobSpec, cluster: Cluster) -> None:
    """At submission (in the manager's planning child): the scenario's sites are the
    cluster's, and every workload passes the dry run a real run gives it."""
    problem = _scenario(spec, cluster)
    missing = sorted({s.name for s in problem.sites} - {s.name for s in cluster.sites})
    if missing:
        raise ConfigError(f"the cluster has no sites named {', '.join(missing)}",
                          field="scenario.sites")
    check_workloads(spec, problem)


def _plan(spec: SitesJobSpec, ctx: JobContext) -> Planned:
    problem = _scenario(spec, ctx.cluster)
    workloads = job_workloads(spec, problem)  # dry-run by execute, through ctx.limited
    plan = plan_schedule(problem, spec.policy, seed=spec.seed)
    site_devices(ctx.cluster, problem, plan)  # ConfigError if a site lacks devices
    names = [s.name for s in problem.sites]
    rows = [[e.slot, e.job, names[e.ps_site],
             ", ".join(f"{names[r]}: {y}" for r, y in enumerate(e.workers) if y),
             e.chunks] for e in plan.entries]
    view: dict[str, Any] = {
        "policy": spec.policy, "slots": plan.n_slots, "completion": dict(plan.completion),
        "tables": [{"title": "per-slot schedule: parameter server, workers per site, "
                             "chunks trained",
                    "columns": ["slot", "job", "PS site", "workers", "chunks"],
                    "rows": rows}]}
    if workloads:
        view["workloads"] = {name: w.label for name, w in workloads.items()}
    return Planned(view, (problem, plan, workloads))


def _events(ctx: JobContext, total: int) -> Any:
    trained = [0]

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch":
            ctx.metric(f"{data['job']}.val_accuracy", data["val_accuracy"],
                       step=data["epoch"] + 1)
        elif kind == "job_slot":
            r: SlotRecord = data["record"]
            trained[0] += r.chunks
            if r.migrated:
                ctx.event("migration", f"{r.job} moved in slot {r.slot}: PS on {r.ps_site}, "
                          f"workers {r.workers}", job=r.job, slot=r.slot, ps_moved=r.ps_moved)
            ctx.progress(min(0.99, trained[0] / total) if total else 0.0, slot=r.slot + 1,
                         val_accuracy=r.val_accuracy)
        elif kind == "transfer":
            m = data["move"]
            ctx.event("transfer", f"{m.chunks} chunks of {m.job} from {m.src} to {m.dst}",
                      job=m.job, chunks=m.chunks, bytes=m.wire_bytes)
        ctx.check_stop()

    return on_event


def _execute(spec: SitesJobSpec, planned: Planned, ctx: JobContext) -> dict[str, Any]:
    problem, plan, workloads = planned.payload
    config = SiteRunConfig(seed=spec.seed, epochs_per_slot=spec.epochs_per_slot)
    total = sum(e.chunks for e in plan.entries)
    run = execute(ctx.runtime, problem, plan, config=config, events=_events(ctx, total),
                  workloads=workloads, limited=ctx.limited)
    accuracy = sum(run.final_accuracy.values()) / max(1, len(run.final_accuracy))
    return {"val_accuracy": accuracy, "migrations": run.migrations,
            "chunks_moved": run.chunks_moved, "seconds": run.seconds}


def _example(cluster: Cluster) -> dict[str, Any]:
    return SitesJobSpec(epochs_per_slot=1).model_dump(mode="json")


SITES_KIND = JobKind(
    name="sites", spec=SitesJobSpec, example=_example, plan=_plan, execute=_execute,
    check=_check,
    description="Okita multi-site training: jobs scheduled slot by slot on the cluster's "
                "sites (workers, parameter server, data moves), trained for real on the "
                "digits CNN or the spec's workload")

API = ProblemApi("sites", lambda ctx: build_sites_router(ctx.limited), kinds=(SITES_KIND,))
"""Okita's offer to the manager (entry point ``edgewise.problems``)."""
