"""The ``update`` kind of job: a model update planned (given shards, Deep-Edge's Solver,
fair or equal) and trained on the cluster by the training engine, epoch by epoch, with a
checkpoint per epoch from which a restarted manager resumes it."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgewise.cluster.model import Cluster, Role
from edgewise.errors import ConfigError
from edgewise.jobs import JobContext, JobKind, Planned
from edgewise.nn.data import digits_split
from edgewise.nn.workload import Workload, resolved, validate
from edgewise.runtime.engine import EpochRecord, Interruption
from edgewise.runtime.plan import TrainConfig, TrainPlan, equal_plan
from edgewise.update.api_schemas import TrainJobSpec
from edgewise.update.policies import get_policy
from edgewise.update.problem import UpdatePlan, UpdateProblem
from edgewise.update.run import (
    APP_COLUMNS,
    UpdateRun,
    app_row,
    cluster_problem,
    execute,
    to_train_plan,
)

__all__ = ["DEFAULT_BATCH_SIZE", "UPDATE_KIND", "JobPlan", "build_plan", "job_workload",
           "training_set_size", "validate_spec"]

DEFAULT_BATCH_SIZE = 32
"""Mini-batch size of a worker the spec gives none."""
_UNKNOWN = "no such device in the cluster"


@functools.cache
def training_set_size() -> int:
    """Samples in the digits training split that the data store serves (1,437)."""
    return len(digits_split()[0])


def _check_names(names: Iterable[str], allowed: Iterable[str], field: str, problem: str) -> None:
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ConfigError(f"{problem}: {', '.join(repr(n) for n in unknown)}", field=field)


def validate_spec(cluster: Cluster, spec: TrainJobSpec) -> list[str]:
    """The job's workers; ConfigError naming the field if a device name is wrong:
    ``workers`` (default: the worker-role devices), ``shards`` and ``batch_sizes`` must name
    devices of ``cluster``, and the maps only the job's workers."""
    if spec.workers is None:
        workers = [d.name for d in cluster.with_role(Role.WORKER)]
        if not workers:
            raise ConfigError("the cluster has no device with the worker role", field="workers")
    else:
        _check_names(spec.workers, cluster.device_names, "workers", _UNKNOWN)
        workers = list(spec.workers)
    lacking = [w for w in workers if not cluster.device(w).has_role(Role.WORKER)]
    if lacking:
        raise ConfigError(f"devices without the worker role: {', '.join(lacking)}", field="workers")
    for field, mapping in (("shards", spec.shards), ("batch_sizes", spec.batch_sizes)):
        if mapping is not None:
            _check_names(mapping, cluster.device_names, field, _UNKNOWN)
            _check_names(mapping, workers, field, "not among the job's workers")
    return workers


def job_workload(spec: TrainJobSpec) -> tuple[Workload | None, int]:
    """The spec's own workload, checked by a dry run on this machine (ConfigError naming the
    ``workload.`` field), and its training samples; (None, 1,437) for the built-in model on
    digits."""
    if spec.workload is None:
        return None, training_set_size()
    workload = spec.workload.to_workload()
    try:
        dry = validate(workload, seed=spec.seed)
    except ConfigError as exc:
        raise ConfigError(exc.problem, field=f"workload.{exc.field or 'model'}") from None
    return resolved(workload, dry), dry.train_samples


@dataclass(frozen=True, slots=True)
class JobPlan:
    """An update job's plan: the engine's (``train``), the policy's when a policy made it
    (``policy_plan``: the executor then re-plans through that policy after a fault) and
    the problem it was made for."""

    train: TrainPlan
    problem: UpdateProblem
    policy_plan: UpdatePlan | None = None

    @property
    def executed(self) -> UpdatePlan | TrainPlan:
        """What ``update.run.execute`` is given."""
        return self.policy_plan if self.policy_plan is not None else self.train


def build_plan(cluster: Cluster, spec: TrainJobSpec, workers: list[str],
               n_samples: int | None = None) -> JobPlan:
    """The job's plan: the spec's shards, else its policy's over ``workers`` (the server
    and store where the cluster's roles put them); a worker without a batch size gets
    ``DEFAULT_BATCH_SIZE``. ConfigError (``shards``) if the shards miss a worker or do not
    sum to the training set's size ``n_samples`` (default: the 1,437 digits)."""
    n_samples = training_set_size() if n_samples is None else n_samples
    pool = cluster.without(frozenset(cluster.device_names) - set(workers) - _servers(cluster))
    problem = cluster_problem(pool, {}, n_samples, noise_scale=spec.noise_scale)
    planned: UpdatePlan | None = None
    if spec.shards is None and spec.policy != "equal":
        planned = get_policy(spec.policy)(problem, np.random.default_rng(spec.seed))
        base = to_train_plan(pool, planned, n_samples)
    else:
        base = equal_plan(pool, n_samples, DEFAULT_BATCH_SIZE,
                          exclude=frozenset(cluster.device_names) - set(workers))
    shards, batches = dict(base.shards), dict(base.batch_sizes)
    if spec.shards is not None:
        missing = [w for w in workers if w not in spec.shards]
        if missing:
            raise ConfigError(f"no shard for workers {', '.join(missing)}", field="shards")
        shards = dict(spec.shards)
        batches = dict.fromkeys(shards, DEFAULT_BATCH_SIZE)
    batches.update(spec.batch_sizes or {})
    policy = "given" if spec.shards is not None else base.policy
    plan = TrainPlan(shards, {w: batches.get(w, DEFAULT_BATCH_SIZE) for w in shards},
                     base.ps_device, base.store_device, policy)
    plan.validate(cluster, n_samples)  # shards must cover the training set exactly once
    changed = spec.shards is not None or spec.batch_sizes is not None
    return JobPlan(plan, problem, None if changed else planned)


def _servers(cluster: Cluster) -> set[str]:
    return {d.name for d in cluster.devices
            if d.has_role(Role.PARAMETER_SERVER) or d.has_role(Role.DATA_STORE)}


def _check(spec: TrainJobSpec, cluster: Cluster) -> None:
    build_plan(cluster, spec, validate_spec(cluster, spec), job_workload(spec)[1])


def _plan(spec: TrainJobSpec, ctx: JobContext) -> Planned:
    workload, n_samples = ctx.limited(job_workload, spec)  # builds the network: not here
    job_plan = build_plan(ctx.cluster, spec, validate_spec(ctx.cluster, spec), n_samples)
    plan = job_plan.train
    rows = [[w, plan.shards[w], plan.batch_sizes[w]] for w in plan.workers]
    view = {"policy": plan.policy, "parameter_server": plan.ps_device,
            "data_store": plan.store_device, "shards": dict(plan.shards),
            "batch_sizes": dict(plan.batch_sizes),
            "tables": [{"title": "workers: data shard and batch size",
                        "columns": ["worker", "shard (samples)", "batch size"], "rows": rows}]}
    if spec.workload is not None:
        view["workload"] = {"model": spec.workload.model, "data": spec.workload.data,
                            "train_samples": sum(plan.shards.values())}
    return Planned(view, (job_plan, workload))


def _events(spec: TrainJobSpec, ctx: JobContext) -> Any:
    """The engine's events as the job's progress, metrics and events; stops it if asked."""
    done = [0.0]  # the fraction of the epochs completed
    spent = [0.0]  # device seconds of the epochs completed (the accuracy curve's x)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_end":
            r: EpochRecord = data["record"]
            step = r.epoch + 1
            spent[0] += r.device_seconds
            ctx.metric("device_seconds_elapsed", spent[0], step=step)
            for name, value in (("epoch", step), ("val_accuracy", r.val_accuracy),
                                ("samples_per_second", r.samples_per_second),
                                ("epoch_seconds", r.wall_seconds),
                                ("samples_applied", len(r.applied_ids)),
                                ("samples_distinct", len(np.unique(r.applied_ids))),
                                ("epoch_device_seconds", r.device_seconds),
                                ("staleness_mean", r.staleness_mean),
                                ("staleness_max", r.staleness_max)):
                ctx.metric(name, value, step=step)
            if r.noise_scale is not None:  # the sync loop's, with two workers or more
                ctx.metric("gradient_noise_scale", r.noise_scale, step=step)
            if r.noise_scale_adam is not None:  # the same, preconditioned by Adam's step
                ctx.metric("gradient_noise_scale_adam", r.noise_scale_adam, step=step)
            if r.learning_rate is not None:  # the server's, warm-up and batch scaling in
                ctx.metric("learning_rate", r.learning_rate, step=step)
            done[0] = step / spec.epochs
            ctx.progress(done[0], epoch=step, epochs=spec.epochs,
                         val_accuracy=r.val_accuracy)
            ctx.event("epoch", f"epoch {step} done, accuracy {r.val_accuracy:.3f}",
                      epoch=step)
        elif kind == "checkpoint":  # the epoch's checkpoint landed (runtime.shipping)
            ctx.event("checkpoint", f"epoch {data['epoch'] + 1} checkpointed",
                      epoch=data["epoch"] + 1)
        elif kind == "epoch_lost":
            ctx.event("fault", f"epoch {data['epoch'] + 1}'s checkpoint was lost with its "
                      "server; the epoch runs again", epoch=data["epoch"] + 1)
        elif kind == "interrupted":
            i: Interruption = data["interruption"]
            ctx.event("fault", f"lost {i.member} on {i.device}: {i.reason}", device=i.device,
                      epoch=i.epoch)
            ctx.event("strike", f"{i.device}: strike {i.strikes}", device=i.device,
                      strikes=i.strikes)
        elif kind == "restart":
            excluded = data.get("excluded")
            ctx.event("replan", f"restart {data['restart']}: re-planned on "
                      f"{', '.join(data['plan'].workers)}", restart=data["restart"],
                      excluded=excluded)
            ctx.progress(done[0], restarts=int(data["restart"]))
        elif kind == "resumed":
            ctx.event("resumed", f"resumed from the checkpoint of epoch {data['epoch']}",
                      epoch=data["epoch"])
        ctx.check_stop()

    return on_event


def _execute(spec: TrainJobSpec, planned: Planned, ctx: JobContext) -> dict[str, Any]:
    """The plan carried out by the problem's one executor, ``update.run.execute``, as
    ``edgewise update run`` does: the cluster's background apps run beside the training,
    and their deadline misses are the job's too."""
    job_plan, workload = planned.payload
    config = TrainConfig(model=spec.model, workload=workload, mode=spec.mode,
                         wire_dtype=spec.wire_dtype, evaluation=spec.evaluation,
                         ps_shards=spec.ps_shards, epochs=spec.epochs,
                         learning_rate=spec.learning_rate, seed=spec.seed,
                         lr_reference_batch=spec.lr_reference_batch,
                         target_accuracy=spec.target_accuracy)
    done = execute(ctx.runtime, job_plan.problem, job_plan.executed, config=config,
                   ledger=ctx.ledger, events=_events(spec, ctx),
                   checkpoint_dir=ctx.work_dir / "checkpoints", resume=ctx.resumed,
                   limited=ctx.limited, background_apps=spec.background_apps)
    _report_apps(done, ctx, planned.view)
    result = done.result
    last = result.epochs[-1] if result.epochs else None
    target = spec.target_accuracy
    return {"epoch": last.epoch + 1 if last else spec.epochs,
            "val_accuracy": last.val_accuracy if last else None,
            "restarts": len({i.detected_at for i in result.interruptions}),
            "stopped_early": int(result.stopped_early),
            "mode": spec.mode, "wire_dtype": spec.wire_dtype, "ps_shards": spec.ps_shards,
            "device_seconds": sum(r.device_seconds for r in result.epochs),
            "time_to_accuracy": None if target is None else result.time_to_accuracy(target),
            "apps": len(done.apps), "app_periods": done.app_periods,
            "deadline_misses": done.deadline_misses}


def _report_apps(done: UpdateRun, ctx: JobContext, view: dict[str, Any]) -> None:
    """Each background app's statistics as an event, a metric and a table of the plan."""
    rows = []
    for a in done.apps:
        ctx.event("app", f"{a['app']}: {a['misses']} of {a['periods']} periods missed the "
                  "deadline", **{k: v for k, v in a.items() if isinstance(v, int | float | str)})
        ctx.metric(f"deadline_misses.{a['app']}", float(a["misses"]))
        rows.append(app_row(a))
    if rows:
        table = {"title": "background apps, measured while the update ran",
                 "columns": list(APP_COLUMNS), "rows": rows}
        ctx.update_plan({**view, "tables": [*view.get("tables", []), table]})


def _example(cluster: Cluster) -> dict[str, Any]:
    return TrainJobSpec(epochs=2, learning_rate=0.003).model_dump(mode="json")


UPDATE_KIND = JobKind(
    name="update", spec=TrainJobSpec, example=_example, plan=_plan, execute=_execute,
    check=_check, resumable=True,
    description="Deep-Edge model update: plan shards and batches, train with a parameter "
                "server, survive faults, resume from the last checkpoint")
