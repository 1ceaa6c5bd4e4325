"""`edgewise bench pipeline-scale`: models too big for one device over 16 testbed devices,
against PipeEdge (Hu et al., DSD 2022).

1. ``pipeline-16-homogeneous.yaml`` (16 Raspberry Pi 4 2 GB): ViT-Large on 1, 2, 4, 8 and
   16 devices with each curve policy (``--quick``: 1 and 16, pipeedge and
   bottleneck-search); the speed-up is 16 devices over one running the whole model.
   ViT-Huge, which no device holds, on 4 and 16.
2. ``pipeline-16-heterogeneous.yaml`` (Pis, Nanos, TX2s, an Orin Nano): ViT-Large on all 16
   with every policy, ours over PipeEdge's partition; then one device killed under load.

Every run's outputs are checked against the whole model, evaluated once off the devices;
throughputs are steady-state results (micro-batches of ``--micro-batch`` inputs) per
second (wall, in ``timings``; ratios are dimensionless and the same in device time).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.cluster.examples import example_path
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.nn.large import LargeModel
from edgewise.pipeline.dispatcher import Dispatcher, Result
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.scale import serve, steady_requests, whole_model_outputs
from edgewise.pipeline.scale_run import SCALES, ScaleSetup, load_model, plan_on, run_json, setup
from edgewise.pipeline.workload import random_inputs
from edgewise.testbed.host import require
from edgewise.testbed.lifecycle import require_cgroups
from edgewise.testbed.plan import DEFAULT_SUBNET
from edgewise.testbed.session import Testbed, testbed
from edgewise.testbed.teardown import leftovers

__all__ = ["SPEC", "real"]

COUNTS = (1, 2, 4, 8, 16)
CURVE_POLICIES = ("pipeedge", "bottleneck-search", "even")
QUICK_COUNTS, QUICK_POLICIES = (1, 16), ("pipeedge", "bottleneck-search")
PARTS = ("homogeneous", "heterogeneous")
ALL_POLICIES = ("pipeedge", "bottleneck-search", "seifer", "joint-greedy", "even")
MICRO_BATCH = 8
"""Inputs per request: PipeEdge's runtime streams micro-batches, 8 by default (the
``--splits`` default of usc-isi/PipeEdge's ``runtime.py``, batch 64 split in micro-batches
of 8). A request then carries 8 inputs through every stage, so each hop's fixed cost (a
Ray call, about 0.7 ms of CPU at each end) is paid once per 8 inputs; every run of a bench
uses the same micro-batch, the one-device baselines too."""


class _Bench:
    """The bench's state: its context, the runs so far, what each testbed left behind."""

    def __init__(self, ctx: BenchContext, weights: Path) -> None:
        self.ctx, self.weights = ctx, weights
        self.scale = _scale(ctx)
        self.requests = int(ctx.option("requests"))
        self.runs: list[dict[str, Any]] = []
        self.counts = QUICK_COUNTS if ctx.quick else COUNTS
        self.policies = QUICK_POLICIES if ctx.quick else CURVE_POLICIES
        self.left: dict[str, int] = {}
        self.sent = self.requests  # requests of the run being served
        self.part = ""  # the testbed up now: runs' timings are keyed by it

    @contextmanager
    def up(self, key: str) -> Iterator[Testbed]:
        name = f"ewscale-{key[:5]}"
        with self.ctx.timings.timed(f"{key}_seconds"), testbed(
                example_path(f"pipeline-16-{key}.yaml"), name,
                subnet=str(self.ctx.option("subnet")), fresh=True) as tb:
            self.ctx.timings[f"{key}_up_seconds"] = tb.record.up_seconds
            self.part = key
            yield tb
        self.left[key] = sum(leftovers(name, require_cgroups()).values())

    def model(self, name: str) -> tuple[LargeModel, list[Any], list[Any]]:
        lm = load_model(name, self.weights, scale=self.scale, seed=self.ctx.seed,
                        micro_batch=int(self.ctx.option("micro_batch")))
        inputs = random_inputs(lm.example, self.requests, self.ctx.seed)
        return lm, inputs, whole_model_outputs(lm, inputs)

    def stream(self, data: tuple[LargeModel, list[Any], list[Any]], plan: PipelinePlan,
               problem: PipelineProblem) -> tuple[list[Any], list[Any]]:
        """The requests a run of ``plan`` serves (``steady_requests``: ``--requests``, and
        enough for a steady span): the same seeded inputs, extended, with the whole model's
        outputs computed once for each."""
        lm, inputs, reference = data
        n = steady_requests(problem, plan, self.requests)
        self.sent = n
        if len(inputs) < n:
            more = random_inputs(lm.example, n, self.ctx.seed)[len(inputs):]
            inputs.extend(more)
            reference.extend(whole_model_outputs(lm, more))
        return inputs[:n], reference[:n]

    def run(self, s: ScaleSetup, data: tuple[LargeModel, list[Any], list[Any]], count: int,
            policy: str, on_result: Any = None, tag: str = "") -> dict[str, Any]:
        """Plan on ``count`` devices, serve, record; an infeasible plan is recorded too."""
        lm = data[0]
        label = f"{self.part} {lm.spec.name} {policy} on {count}{tag}".strip()
        self.ctx.progress(label, min(0.95, len(self.runs) / 40))
        try:
            problem, plan = plan_on(s, count, policy, self.ctx.seed)
        except (InfeasibleError, ConfigError) as exc:  # an infeasible plan is a figure here
            out = {"model": lm.spec.name, "policy": policy, "devices": count,
                   "infeasible": str(exc)}
        else:
            inputs, reference = self.stream(data, plan, problem)
            started = time.perf_counter()
            done = serve(s.runtime, lm, problem, plan, inputs, reference,
                         on_result=on_result)
            out = {"model": lm.spec.name, **run_json(s, problem, plan, done),
                   "requests_sent": len(inputs),
                   "run_seconds": round(time.perf_counter() - started, 2)}
            self.ctx.timings[f"{label} steady_rps"] = done.steady_rps
        self.runs.append(out)
        log = str(self.ctx.option("runs_log"))
        if log:  # each run as it ends: a stopped bench keeps what it measured
            with Path(log).open("a") as f:
                f.write(json.dumps(out) + "\n")
        return out


def _parts(ctx: BenchContext) -> list[str]:
    chosen = [p.strip() for p in str(ctx.option("parts")).split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown or not chosen:
        raise ConfigError(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}",
                          field="--parts")
    return chosen


def _scale(ctx: BenchContext) -> str:
    scale = str(ctx.option("model_scale"))
    if scale not in SCALES:
        raise ConfigError(f"--model-scale is {', '.join(SCALES)}, got {scale!r}",
                          field="--model-scale")
    return scale


def _ratio(a: float, b: float) -> float | None:
    """a / b, or None where either was not measured (no steady span)."""
    return round(a / b, 4) if a > 0 and b > 0 else None


def _rps(run: dict[str, Any]) -> float:
    return float(run.get("steady_throughput_rps", 0.0))


def _homogeneous(b: _Bench) -> Figures:
    out: Figures = {}
    with b.up("homogeneous") as tb:
        out["nodes"] = tb.alive_nodes()
        out["up_seconds"] = tb.record.up_seconds
        large = b.model("vit-large")
        s = setup(tb.runtime, large[0])
        curve = {p: {n: _rps(b.run(s, large, n, p)) for n in b.counts} for p in b.policies}
        out["vit_large_speedup_16_over_1"] = _ratio(max(curve[p][16] for p in b.policies),
                                                    max(curve[p][1] for p in b.policies))
        out["vit_large_throughput_by_devices"] = curve
        huge = b.model("vit-huge")
        s = setup(tb.runtime, huge[0])
        four = max(_rps(b.run(s, huge, 4, p)) for p in b.policies)
        sixteen = max(_rps(b.run(s, huge, 16, p)) for p in b.policies)
        out["vit_huge_one_device"] = b.run(s, huge, 1, "pipeedge").get("infeasible")
        out["vit_huge_speedup_16_over_4"] = _ratio(sixteen, four)
    return out


def _heterogeneous(b: _Bench) -> Figures:
    out: Figures = {}
    with b.up("heterogeneous") as tb:
        large = b.model("vit-large")
        s = setup(tb.runtime, large[0], measure_links=bool(b.ctx.option("measure_links")))
        by_policy = {p: _rps(b.run(s, large, 16, p)) for p in ALL_POLICIES}
        ours = max(v for p, v in by_policy.items() if p != "pipeedge")
        out["heterogeneous_throughput_by_policy"] = by_policy
        out["heterogeneous_throughput_ratio_to_pipeedge"] = _ratio(ours, by_policy["pipeedge"])
        best = max(by_policy, key=lambda p: by_policy[p])
        out |= _kill(b, s, large, best, tb)
    return out


def _kill(b: _Bench, s: ScaleSetup, data: tuple[LargeModel, list[Any], list[Any]],
          policy: str, tb: Testbed) -> Figures:
    """Kill the device of the plan's middle stage a fifth into the stream."""
    killed: list[str] = []
    faults = tb.faults()

    def kill(dispatcher: Dispatcher, result: Result) -> None:
        if result.request_id == b.sent // 5 and not killed:
            victim = dispatcher.stages[len(dispatcher.stages) // 2].device
            faults.kill_device(victim)
            killed.append(victim)

    run = b.run(s, data, 16, policy, on_result=kill, tag=", a device killed")
    n = run.get("requests", 0)
    # delivered twice (none may be); a resent request's late copy that the dispatcher
    # dropped is ``duplicates_suppressed``: the mechanism that keeps delivery exactly once
    return {"requests_lost": run.get("requests_sent", 0) - (n - (run.get("duplicates") or 0)),
            "requests_duplicated": run.get("duplicates"),
            "duplicates_suppressed": run.get("duplicates_suppressed"),
            "kill_device": killed[0] if killed else None, "kill_policy": policy,
            "kill_restarts": run.get("restarts")}


def real(ctx: BenchContext) -> Figures:
    """The protocol of the module docstring."""
    _scale(ctx)  # bad options are refused before anything is made
    parts = _parts(ctx)
    require()  # a host that cannot run testbeds: one line naming what it lacks
    with tempfile.TemporaryDirectory(prefix="ew-scale-") as tmp:
        weights = Path(str(ctx.option("weights_dir") or tmp))
        b = _Bench(ctx, weights)
        figures = _homogeneous(b) if "homogeneous" in parts else {}
        figures |= _heterogeneous(b) if "heterogeneous" in parts else {}
    served = [r for r in b.runs if "stages" in r]
    stages = [st for r in served for st in r["stages"]]
    busy = [r["busiest_fraction"] for r in served if r["stages_used"] > 1]
    return {**figures,
            "outputs_max_abs_diff": max((r["outputs_max_abs_diff"] for r in served),
                                        default=None),
            "stage_peak_memory_ratio_max": max((st["peak_memory_ratio"] for st in stages),
                                               default=None),
            "bottleneck_busy_fraction_min": min(busy, default=None),
            "down_leftovers": sum(b.left.values()), "down_leftovers_by_testbed": b.left,
            "model_scale": b.scale, "runs": b.runs}


SPEC = BenchSpec(
    name="pipeline-scale",
    title="Models too big for one device: ViT-Large/Huge pipelined over 16 testbed devices "
          "(homogeneous and heterogeneous), every policy against PipeEdge's partitioner.",
    simulated=None,
    real="edgewise.suites.pipeline_scale:real",
    plots="edgewise.suites.pipeline_scale_plots:plots",
    options=(
        BenchOption("subnet", DEFAULT_SUBNET, "private IPv4 subnet of the testbeds",
                    kind="str"),
        BenchOption("parts", ",".join(PARTS), "parts to run, comma-separated: "
                    + ", ".join(PARTS), kind="str"),
        BenchOption("requests", 24, "requests per run, at least (a run serves at least "
                    "three of its plan's windows: fill, steady, drain)", minimum=6),
        BenchOption("model_scale", "full", "full (ViT-Large/Huge as published), medium "
                    "(their depth, hidden 256: compute-bound stages on a host too small for "
                    "full size) or small (4 layers, hidden 64: for trying the bench)",
                    kind="str"),
        BenchOption("micro_batch", MICRO_BATCH, "inputs per request, as PipeEdge's runtime "
                    "splits a batch into micro-batches", minimum=1),
        BenchOption("measure_links", False, "plan the heterogeneous runs on measured links",
                    kind="bool"),
        BenchOption("runs_log", "", "append each run to this file as a JSON line as it ends",
                    kind="str"),
        BenchOption("weights_dir", "", "where the seeded weight shards go (default: a "
                    "temporary folder)", kind="str"),
    ),
    labels={"vit_large_speedup_16_over_1": "steady results/s on 16 devices over one device "
            "running the whole model, the best of the curve policies at each",
            "bottleneck_busy_fraction_min": "over the runs with 2 or more stages: the busiest "
            "resource's busy fraction in the steady span (from the window-th result to the "
            "one that lets the last request in): a stage's compute seconds, or a link's wire "
            "bits over its rate, over the span's wall seconds"},
)
