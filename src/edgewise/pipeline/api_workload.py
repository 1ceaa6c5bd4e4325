"""The pipeline job on the user's own model (its spec's ``workload``): checked by a dry run
before the job is taken, planned as `edgewise pipeline run --workload` plans it, streamed
through :func:`edgewise.pipeline.run.execute` (the command's executor) and its outputs
checked against the whole model's, version by version."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.jobs import JobContext
from edgewise.nn.chain import ModelChain
from edgewise.nn.workload import Workload, open_data, resolved, validate
from edgewise.pipeline.api_schemas import PipelineJobSpec
from edgewise.pipeline.api_serving import Meter, NotServing
from edgewise.pipeline.dispatcher import Dispatcher, Result
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.run import PipelineRun, execute
from edgewise.pipeline.workload import (
    EXACT_ATOL,
    VACUOUS_ABS,
    OutputCheck,
    chain_problem,
    compare_outputs,
    partitioned,
    reference_outputs,
)
from edgewise.wire.activation import ActivationCodec

__all__ = ["MAX_DISTINCT_INPUTS", "MIN_STAGES", "JobWorkload", "check_serving",
           "execute_workload", "job_problem", "job_workload", "versioned_check"]

MIN_STAGES = 3
"""As `pipeline run --workload`: no plan with fewer stages where the cluster has the devices."""
MAX_DISTINCT_INPUTS = 256
"""Samples of the validation split the requests cycle through (each checked once per version)."""
_MB = 1e6
NO_HTTP = ("a pipeline job with a workload streams its own requests through the pipeline "
           "executor and takes no HTTP requests or switches (its spec's switch_after switches "
           "it); /infer and /switch serve the digits CNN's pipeline jobs")


@dataclass(frozen=True, slots=True)
class JobWorkload:
    """A job's workload as its dry run resolved it (input shape, classes) and the chain of
    segments of its traced model, which the policy plans."""

    workload: Workload
    chain: ModelChain


def _named(exc: ConfigError) -> ConfigError:
    field = exc.field or "model"
    return ConfigError(exc.problem, field=field if field.startswith("workload.")
                       else f"workload.{field}")


def job_workload(spec: PipelineJobSpec) -> JobWorkload:
    """The spec's workload checked by a dry run on this machine (files, data and classes,
    a batch of its data through the model) and traced into its chain at the candidate
    points a pipeline may cut; ConfigError naming the ``workload.`` field. Heavy (it builds
    the network): the manager runs it in its planning child."""
    if spec.workload is None:
        raise ConfigError("this job has no workload", field="workload")
    workload = spec.workload.to_workload()
    try:
        workload = resolved(workload, validate(workload, seed=spec.seed, training=False))
        return JobWorkload(workload, partitioned(workload, spec.seed)[1].chain)
    except ConfigError as exc:
        raise _named(exc) from None


def check_serving(spec: PipelineJobSpec) -> None:
    """ConfigError (``serve_seconds``) for a workload job asked to serve HTTP requests."""
    if spec.workload is not None and spec.serve_seconds > 0:
        raise ConfigError(f"must be 0 with a workload: {NO_HTTP}", field="serve_seconds")


def job_problem(cluster: Cluster, chain: ModelChain, spec: PipelineJobSpec,
                dispatcher: str) -> PipelineProblem:
    """The workload's placement problem as `pipeline run --workload` builds it, on the
    spec's devices (default: all but the dispatcher): each offers ``memory_cap_mb``, else
    just under 1 / (n - 1) of the model, n = min(3, devices), so that a plan has n stages."""
    nodes = list(spec.devices) if spec.devices is not None else [
        n for n in cluster.device_names if n != dispatcher]
    cap = None if spec.memory_cap_mb is None else int(spec.memory_cap_mb * _MB)
    return chain_problem(cluster, chain, min_stages=min(MIN_STAGES, len(nodes)),
                         node_memory_bytes=cap, dispatcher=dispatcher, nodes=nodes)


def request_inputs(workload: Workload, seed: int, count: int) -> list[np.ndarray[Any, Any]]:
    """The first min(``count``, MAX_DISTINCT_INPUTS) samples of the workload's validation
    split (split by ``seed``), one batch-1 request each."""
    source = open_data(workload, seed)
    n = min(count, source.size("val"), MAX_DISTINCT_INPUTS)
    if count > 0 and n == 0:
        raise ConfigError("the data's validation split is empty", field="workload.val_fraction")
    x = source.read("val", np.arange(n, dtype=np.int64)).x
    return [x[i:i + 1] for i in range(n)]


def _cycled(inputs: Sequence[np.ndarray[Any, Any]], count: int
            ) -> Iterator[np.ndarray[Any, Any]]:
    return (inputs[i % len(inputs)] for i in range(count))


class _Watch:
    """The executor's ``on_result`` hook: the job's metrics and progress per batch of
    results, its stop, and the spec's model switch once ``switch_after`` results are back.
    ``models`` maps each version to the model it deployed (what its outputs are checked
    against)."""

    def __init__(self, ctx: JobContext, spec: PipelineJobSpec, served: JobWorkload,
                 cuts: tuple[int, ...], model: nn.Module) -> None:
        self.ctx, self.spec, self.served, self.cuts = ctx, spec, served, cuts
        self.meter, self.since = Meter(ctx), time.monotonic()
        self.batch: list[Result] = []
        self.models: dict[int, nn.Module] = {0: model}
        self.restarts = 0

    def __call__(self, dispatcher: Dispatcher, result: Result) -> None:
        self.ctx.check_stop()
        self.batch.append(result)
        done = self.meter.total + len(self.batch)
        if len(self.batch) >= 2 * dispatcher.window or done >= self.spec.requests:
            self._flush(dispatcher)
        after = self.spec.switch_after
        if after is not None and done >= after and dispatcher.version == 0:
            self._switch(dispatcher)

    def _flush(self, dispatcher: Dispatcher) -> None:
        now = time.monotonic()
        self.meter.add(self.batch, now - self.since)
        self.batch, self.since = [], now
        if dispatcher.restarts > self.restarts:
            self.restarts = dispatcher.restarts
            self.ctx.event("restart", f"stage restarts: {dispatcher.restarts}; pending "
                           f"requests re-sent ({dispatcher.resends} so far)",
                           restarts=dispatcher.restarts)
        self.ctx.progress(min(self.meter.total / max(self.spec.requests, 1), 0.99),
                          results=self.meter.total, version=dispatcher.version,
                          restarts=dispatcher.restarts)

    def _switch(self, dispatcher: Dispatcher) -> None:
        """The workload rebuilt from ``seed + 1`` (its weights file again when it names
        one), traced, and switched to (the dispatcher drains the old stages first)."""
        model, pm, _ = partitioned(self.served.workload, self.spec.seed + 1)
        dispatcher.switch_model(model, self.cuts, splitter=pm.splitter)
        self.models[dispatcher.version] = model
        self.ctx.event("model-switch", f"switched to model version {dispatcher.version} "
                       f"after {self.meter.total + len(self.batch)} results; nothing dropped",
                       version=dispatcher.version)


def versioned_check(done: PipelineRun, inputs: Sequence[np.ndarray[Any, Any]],
                    models: dict[int, nn.Module]) -> OutputCheck:
    """Each output (request ``i`` carried ``inputs[i % len(inputs)]``) against the whole
    model of the version that answered it."""
    if not inputs:
        return compare_outputs(done.outputs, [])
    refs = {v: reference_outputs(models[v], inputs) for v in sorted(set(done.versions))}
    reference = [refs[v][i % len(inputs)] for i, v in zip(done.request_ids, done.versions,
                                                          strict=True)]
    return compare_outputs(done.outputs, reference)


def execute_workload(spec: PipelineJobSpec, problem: PipelineProblem, plan: PipelinePlan,
                     served: JobWorkload, ctx: JobContext) -> dict[str, Any]:
    """Build and trace the workload's model, stream ``spec.requests`` samples of its data
    through :func:`~edgewise.pipeline.run.execute` cut as ``plan`` says, and check the
    outputs against the whole model; the job's figures."""
    model, pm, _ = partitioned(served.workload, spec.seed)
    if pm.chain.n_segments != served.chain.n_segments:
        raise ConfigError("the model traced into other segments than when it was planned",
                          field="workload.model")
    inputs = request_inputs(served.workload, spec.seed, spec.requests)
    watch = _Watch(ctx, spec, served, tuple(plan.cuts), model)
    ctx.publish(NotServing(NO_HTTP))
    try:
        done = execute(ctx.runtime, problem, plan, model=model,
                       inputs=_cycled(inputs, spec.requests), on_result=watch,
                       splitter=pm.splitter, codec=ActivationCodec("none"), window=spec.window)
    finally:
        ctx.publish(None)
    check = versioned_check(done, inputs, watch.models)
    return {"model": served.workload.label, "stages": plan.n_partitions,
            "requests": spec.requests, "results": len(done.outputs),
            "in_order": int(done.request_ids == list(range(len(done.outputs)))),
            "max_abs_diff": check.max_abs_diff, "top1_agreement": check.top1_agreement,
            "reference_max_abs": check.reference_max_abs,
            "outputs_equal_to_the_model": int(check.max_abs_diff <= EXACT_ATOL),
            "check_vacuous": int(check.compared > 0 and check.reference_max_abs <= VACUOUS_ABS),
            "throughput_rps": done.throughput_rps, "latency_p50_s": done.latency_p50_s,
            "latency_p99_s": done.latency_p99_s, "restarts": done.restarts,
            "resends": done.resends, "duplicates": done.duplicates,
            "version": max(watch.models)}
