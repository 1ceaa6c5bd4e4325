"""`edgewise bench testbed`: what the kernel-enforced testbed measures, and the problems'
real runs on it.

Three shipped example clusters become testbeds, one after the other, each taken down with
its leftovers counted:

1. ``deep-edge-testbed.yaml`` (6 nodes, the reference): Ray nodes alive, every link's TCP
   goodput against its rate, every device's CPU quota on a CPU-bound kernel; then Deep-Edge
   end to end (:mod:`edgewise.suites.testbed_update`): devices profiled where they are,
   models fitted, deep-edge and fair planned and run with the SIFT apps running.
2. ``seifer-bench.yaml`` (5 nodes): SEIFER's pipeline against its bound, per stage, and a
   whole device killed under load (:mod:`edgewise.suites.testbed_pipeline`).
3. ``three-nanos.yaml`` (4 nodes): parameter-server scaling, a device killed mid-epoch and
   a link cut mid-job (:mod:`edgewise.suites.testbed_training`).

A testbed runs ``time_dilation`` times slower than its devices; every time is given as
measured (``timings``) and in device time (measured ÷ the dilation); ratios are
dimensionless.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.cluster.examples import example_path
from edgewise.errors import ConfigError
from edgewise.testbed.host import require
from edgewise.testbed.lifecycle import require_cgroups
from edgewise.testbed.measure import kernel_figures, measure_links
from edgewise.testbed.plan import DEFAULT_SUBNET
from edgewise.testbed.session import Testbed, testbed
from edgewise.testbed.teardown import leftovers

__all__ = ["PARTS", "SPEC", "real"]

PARTS = ("kernel", "update", "pipeline", "training")
_CLUSTERS = {"deep-edge": "deep-edge-testbed.yaml", "seifer": "seifer-bench.yaml",
             "three-nanos": "three-nanos.yaml"}


class _Run:
    """The bench's testbeds, one at a time, and what their downs left behind."""

    def __init__(self, ctx: BenchContext) -> None:
        self.ctx, self.subnet = ctx, str(ctx.option("subnet"))
        self.left: dict[str, int] = {}
        self.dilation: dict[str, float] = {}

    @contextmanager
    def up(self, key: str, share: float) -> Iterator[Testbed]:
        name = f"ewbench-{key}"
        self.ctx.progress(f"bringing up {_CLUSTERS[key]}", share)
        with self.ctx.timings.timed(f"{key}_seconds"), testbed(
                example_path(_CLUSTERS[key]), name, subnet=self.subnet, fresh=True) as tb:
            self.ctx.timings[f"{key}_up_seconds"] = tb.record.up_seconds
            self.dilation[key] = round(tb.runtime.time_dilation, 4)
            yield tb
        self.left[key] = sum(leftovers(name, require_cgroups()).values())


def _parts(ctx: BenchContext) -> set[str]:
    chosen = {p.strip() for p in str(ctx.option("parts")).split(",") if p.strip()}
    unknown = sorted(chosen - set(PARTS))
    if unknown or not chosen:
        raise ConfigError(f"unknown part(s) {unknown}; choose from {', '.join(PARTS)}",
                          field="--parts")
    return chosen


def _deep_edge(run: _Run, parts: set[str]) -> Figures:
    from edgewise.suites.testbed_update import update_figures

    ctx, out = run.ctx, Figures()
    with run.up("deep-edge", 0.0) as tb:
        kernel = kernel_figures(tb)
        ctx.timings["up_seconds"] = kernel.pop("up_seconds")
        out |= kernel
        if "update" in parts:
            out |= update_figures(
                tb.runtime, quick=ctx.quick, seed=ctx.seed,
                profiles_dir=ctx.option("profiles"),
                progress=lambda msg, f: ctx.progress(msg, 0.02 + 0.53 * f))
    return out


def _seifer(run: _Run) -> Figures:
    from edgewise.pipeline.realrun import plan_bench_pipeline
    from edgewise.suites.testbed_pipeline import pipeline_figures, pipeline_kill_figures

    ctx = run.ctx
    requests = int(ctx.option("requests"))
    with run.up("seifer", 0.55) as tb:
        planned = plan_bench_pipeline(tb.runtime.cluster, ctx.seed)
        hops = list(zip([planned.problem.dispatcher or "", *planned.devices[:-1]],
                        planned.devices, strict=True))
        ratios = {(m.src, m.dst): round(m.ratio, 4) for m in measure_links(tb.record, hops)}
        ctx.progress("streaming the SEIFER pipeline", 0.6)
        out = pipeline_figures(tb.runtime, requests=requests, seed=ctx.seed,
                               link_ratios=ratios)
        ctx.progress("killing a stage's device under load", 0.65)
        out |= pipeline_kill_figures(tb.runtime, tb.faults(), requests=requests // 2,
                                     seed=ctx.seed)
    return out


def _three_nanos(run: _Run) -> Figures:
    from edgewise.suites.testbed_training import fault_figures, scaling_figures

    ctx = run.ctx
    with run.up("three-nanos", 0.7) as tb:
        ctx.progress("parameter-server scaling", 0.72)
        out, timings = scaling_figures(tb.runtime, epochs=4 if ctx.quick else 6,
                                       solo_epochs=2 if ctx.quick else 3, seed=ctx.seed)
        ctx.timings.update(timings)
        ctx.progress("a device killed mid-epoch, a link cut mid-job", 0.88)
        out |= fault_figures(tb.runtime, tb.faults(), tb.restart_node, epochs=3,
                             seed=ctx.seed)
    return out


def real(ctx: BenchContext) -> Figures:
    """The protocol of the module docstring; the parts named by ``--parts``."""
    require()  # a host that cannot run testbeds: one line naming what it lacks
    parts, run, started = _parts(ctx), _Run(ctx), time.perf_counter()
    figures: Figures = {}
    if parts & {"kernel", "update"}:
        figures |= _deep_edge(run, parts)
    if "pipeline" in parts:
        figures |= _seifer(run)
    if "training" in parts:
        figures |= _three_nanos(run)
    ctx.timings["testbeds_seconds"] = time.perf_counter() - started
    return {**figures, "time_dilation": run.dilation, "down_leftovers": sum(run.left.values()),
            "down_leftovers_by_testbed": run.left}


SPEC = BenchSpec(
    name="testbed",
    title="The kernel-enforced testbed: links, CPU quotas, Deep-Edge profiled, planned and "
          "run on it, SEIFER's pipeline, parameter-server scaling and node faults.",
    simulated=None,
    real="edgewise.suites.testbed:real",
    options=(
        BenchOption("subnet", DEFAULT_SUBNET, "private IPv4 subnet of the testbeds",
                    kind="str"),
        BenchOption("parts", ",".join(PARTS), "parts to run, comma-separated: "
                    + ", ".join(PARTS), kind="str"),
        BenchOption("requests", 60, "requests streamed through the pipeline (half of "
                    "them in the node-kill run)", minimum=10, maximum=1000),
        BenchOption("profiles", None, "folder that keeps the testbed profiles (a later "
                    "run resumes them; default: fresh, in a temporary folder)",
                    kind="path"),
    ),
    labels={
        "pipeline_throughput_ratio_to_bound":
            "measured throughput × time dilation (device time) ÷ the plan's bound 1 / "
            "bottleneck: kernel-shaped links and cgroup-limited devices, not the formula",
        "ps_scaling_efficiency_3_workers":
            "ratio of two throughputs measured on the testbed in one run",
        "update_epoch_time_prediction_error":
            "|mean measured − predicted| ÷ mean measured epoch time of the deep-edge run's "
            "epochs after the first (enough of them to span ten of the SIFT apps' periods), "
            "in device time; predicted by models fitted to profiles measured on the same "
            "testbed; the median of single epochs' errors is ..._median_of_epochs",
        "link_rate_ratio_min": "TCP goodput ÷ the rate tc was given (Ethernet frames "
                               "counted, TCP payload measured)",
    },
    contract_timings=("up_seconds",),
    real_share=1.0,
)
"""``edgewise bench testbed``."""
