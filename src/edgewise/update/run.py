"""Carries an update plan out (``execute``): the core training engine (a parameter server,
with the config's loop) on the cluster, with each worker's background apps really running
beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import ray

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.perf.calibrated import calibrated
from edgewise.perf.schema import PerfModel
from edgewise.runtime.app_actor import BackgroundAppActor
from edgewise.runtime.engine import Replan, TrainResult, default_replan, train
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.limiting import Limiter, run_inline
from edgewise.runtime.plan import TrainConfig, TrainPlan
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.vessel_pool import release_members, spawn_member
from edgewise.update.cost import integer_shards
from edgewise.update.policies import REGISTRY, get_policy
from edgewise.update.problem import AppLimit, UpdatePlan, UpdateProblem, WorkerState

__all__ = ["APP_COLUMNS", "UpdateRun", "app_row", "apps_running", "cluster_problem", "execute",
           "policy_replan", "to_train_plan"]

Events = Callable[[str, dict[str, Any]], None]


def cluster_problem(cluster: Cluster, states: dict[str, tuple[float, float, float]],
                    n_samples: int, ps_state: tuple[float, float, float] = (10.0, 0.0, 30.0),
                    models: Mapping[str, PerfModel] | None = None,
                    noise_scale: float | None = None) -> UpdateProblem:
    """The update problem of a cluster file: its workers, their background apps (δ = the
    deadline), the given states (idle by the calibrated model otherwise) and the performance
    models by device type (default: the calibrated ones; e.g. learned from a workload's
    profile)."""
    workers = []
    for d in cluster.with_role(Role.WORKER):
        model = calibrated(d.type)
        idle = tuple(float(x) for x in model.idle_state()[0])
        apps = tuple(AppLimit(a.name, a.kind, a.deadline_ms) for a in cluster.apps_on(d.name))
        workers.append(WorkerState(d.name, d.type, states.get(d.name, idle), apps))  # type: ignore[arg-type]
    chosen: dict[str, PerfModel] = {w.device_type: calibrated(w.device_type) for w in workers}
    chosen.update({t: m for t, m in (models or {}).items() if t in chosen})
    return UpdateProblem(tuple(workers), ps_state, n_samples, chosen, noise_scale=noise_scale)


def to_train_plan(cluster: Cluster, plan: UpdatePlan, n_samples: int) -> TrainPlan:
    """The engine's plan: the update plan's shard proportions over ``n_samples`` (integers
    summing to it), its batch sizes (at most the shard), the cluster's server and store."""
    workers = list(plan.workers)
    shards = integer_shards(np.array([plan.shards[w] for w in workers], float), n_samples)
    ps = cluster.with_role(Role.PARAMETER_SERVER)
    store = cluster.with_role(Role.DATA_STORE)
    ps_name = ps[0].name if ps else workers[0]
    return TrainPlan({w: int(s) for w, s in zip(workers, shards, strict=True)},
                     {w: max(1, min(plan.batch_sizes[w], int(s)))
                      for w, s in zip(workers, shards, strict=True)},
                     ps_name, store[0].name if store else ps_name, plan.policy)


@dataclass(frozen=True, slots=True)
class UpdateRun:
    """A plan carried out: the training result and each background app's statistics."""

    plan: UpdatePlan | TrainPlan
    train_plan: TrainPlan
    result: TrainResult
    apps: tuple[dict[str, Any], ...]

    @property
    def deadline_misses(self) -> int:
        """Periods in which a background app missed its deadline, over every app."""
        return sum(int(a["misses"]) for a in self.apps)

    @property
    def app_periods(self) -> int:
        return sum(int(a["periods"]) for a in self.apps)


def policy_replan(problem: UpdateProblem, policy: str, seed: int = 0) -> Replan:
    """The engine's re-plan after a fault through the problem's own policy (Deep-Edge
    §IV-D re-triggers Algorithm 1): the same states, apps and models, on the workers the
    cluster has left; the training set the engine gives."""

    def replan(cluster: Cluster, n_samples: int, previous: TrainPlan) -> TrainPlan:
        left = set(cluster.device_names)
        workers = tuple(w for w in problem.workers if w.device in left)
        if not workers:
            raise ConfigError("no worker left to re-plan on", field="workers")
        again = replace(problem, workers=workers, n_samples=n_samples)
        planned = get_policy(policy)(again, np.random.default_rng(seed))
        return to_train_plan(cluster, planned, n_samples)

    return replan


def execute(runtime: RayRuntime, problem: UpdateProblem, plan: UpdatePlan | TrainPlan, /, *,
            config: TrainConfig | None = None, ledger: StrikeLedger | None = None,
            events: Events | None = None, checkpoint_dir: Path | None = None,
            resume: bool = False, limited: Limiter = run_inline,
            background_apps: bool = True) -> UpdateRun:
    """Carry out the plan a policy made for ``problem`` (the anatomy's executor; the
    command line's ``update run`` and the manager's ``update`` jobs both call it): start
    every background app of the runtime's cluster on its device, train the plan's shards
    of the ``problem.n_samples`` samples through the core engine (``config``: epochs,
    seed, early stop; default ``TrainConfig()``), stop the apps and collect their deadline
    misses. ``plan`` is the policy's (shard proportions) or, for a job whose spec gives the
    shards, the engine's plan itself. After a fault the engine re-plans through the plan's
    policy on the devices left (:func:`policy_replan`); a given plan re-plans with equal
    shards. ``checkpoint_dir``, ``resume`` and ``limited`` are the engine's. Without
    ``background_apps`` the training runs alone (no app statistics). On a cluster
    that runs slower than its devices (``runtime.time_dilation``) the apps' periods and
    deadlines stretch alike, and their execution times are given in device time."""
    cluster = runtime.cluster
    config = config or TrainConfig()
    replan: Replan
    if isinstance(plan, TrainPlan):
        train_plan, replan = plan, default_replan
    else:
        train_plan = to_train_plan(cluster, plan, problem.n_samples)
        replan = policy_replan(problem, plan.policy, config.seed) \
            if plan.policy in REGISTRY.names() else default_replan
    with apps_running(runtime, background_apps) as stats:
        result = train(runtime, config, train_plan, ledger=ledger, replan=replan,
                       events=events, checkpoint_dir=checkpoint_dir, resume=resume,
                       limited=limited)
    return UpdateRun(plan, train_plan, result, tuple(stats))


@contextmanager
def apps_running(runtime: RayRuntime, enabled: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Every background app of the runtime's cluster running on its device while the block
    runs (none unless ``enabled``); the list it yields holds their statistics, in device time,
    once the block ends. ``execute`` trains inside it, and so does any other training that
    must share the devices with their apps (``bench time-to-accuracy``'s DDP arm)."""
    dilation = runtime.time_dilation
    apps = [spawn_member(
        BackgroundAppActor, runtime.member_options(a.device, 128, f"app-{a.name}"),
        a.name, a.kind, a.period_ms * dilation, a.deadline_ms * dilation, i)
        for i, a in enumerate(runtime.cluster.background_apps if enabled else ())]
    stats: list[dict[str, Any]] = []
    try:
        yield stats
    finally:
        stats.extend(_device_time(s, dilation) for s in ray.get([a.stop.remote() for a in apps]))
        release_members(apps)


APP_COLUMNS = ("app", "periods", "misses", "exec ms p50", "exec ms p95", "frames received")
"""The columns of the background apps' table (``update run`` prints it, a job's plan
shows it)."""


def app_row(stats: Mapping[str, Any]) -> list[str | int | float]:
    """One app's statistics as a row of :data:`APP_COLUMNS`."""
    return [str(stats["app"]), int(stats["periods"]), int(stats["misses"]),
            round(float(stats["exec_ms_p50"]), 1), round(float(stats["exec_ms_p95"]), 1),
            int(stats["frames_received"])]


def _device_time(stats: dict[str, Any], dilation: float) -> dict[str, Any]:
    """An app's statistics with its execution times in device time (a cluster that runs
    ``dilation`` times slower than its devices ran the app at a period that much longer)."""
    return {k: v / dilation if k.startswith("exec_ms") else v for k, v in stats.items()}
