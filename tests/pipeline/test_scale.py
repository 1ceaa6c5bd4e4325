"""A small transformer of the ViT-Huge class pipelined on emulated devices from its weight
shards: every request answered once, in order, equal to the whole model; each stage holds
exactly its slice; a plan that does not fit is refused before anything starts."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
import ray

from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import InfeasibleError
from edgewise.nn.large import LargeModel, large_spec, prepare
from edgewise.pipeline.policies import get_policy
from edgewise.pipeline.problem import PipelinePlan
from edgewise.pipeline.run import check_memory
from edgewise.pipeline.scale import (
    WINDOW_PER_STAGE,
    Busy,
    cluster_problem,
    profile_gflops,
    serve,
    stage_peak,
    whole_model_outputs,
    window_for,
)
from edgewise.pipeline.sim import PipelineOutcome
from edgewise.pipeline.workload import random_inputs
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from tests.clusters import SCALE_CLUSTER

SMALL = {"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
         "intermediate_size": 64, "image_size": 16, "patch_size": 8, "num_labels": 5}


@pytest.fixture(scope="module")
def runtime() -> Iterator[RayRuntime]:
    rt = start_local(cluster_from_dict(SCALE_CLUSTER, source="test"))
    yield rt
    rt.shutdown()


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> LargeModel:
    return prepare(large_spec("vit-huge", **SMALL), Path(tmp_path_factory.mktemp("vit")), 1)


@pytest.mark.ray
def test_small_vit_pipeline_answers_once_and_holds_only_its_slices(
        runtime: RayRuntime, small: LargeModel) -> None:
    nodes = [f"pi-{i}" for i in range(4)]
    started = time.perf_counter()
    gflops = profile_gflops(runtime, small, nodes, repeats=1, min_seconds=0.3)
    # each device type's passes span the least wall time asked (testbed quotas average out)
    kinds = {runtime.cluster.device(n).type for n in nodes}
    assert time.perf_counter() - started >= 0.3 * len(kinds)
    assert all(g > 0 for g in gflops.values())
    assert set(gflops) == set(nodes) and all(g > 0 for g in gflops.values())
    problem = cluster_problem(runtime.cluster, small.partitioned.chain, gflops,
                              dispatcher="host")
    plan = get_policy("even")(problem, np.random.default_rng(0))
    inputs = random_inputs(small.example, 10, seed=2)
    done = serve(runtime, small, problem, plan, inputs, whole_model_outputs(small, inputs))
    assert done.run.request_ids == list(range(10)) and done.run.duplicates == 0
    assert done.max_abs_diff <= 1e-4
    sizes = {k: v.numel() for k, v in small.reference().named_parameters()}
    for (_, ref), timing in zip(small.payloads(plan.cuts), done.run.stage_timings,
                                strict=True):
        assert timing["parameters"] == sum(sizes[n] for _, n in ref.sources if n in sizes)
    assert sum(t["parameters"] for t in done.run.stage_timings) == sum(sizes.values())
    busy = done.busy
    assert len(busy.compute) == len(busy.link) == plan.n_partitions == 4
    assert busy.stages == tuple(max(c, w) for c, w in zip(busy.compute, busy.link, strict=True))
    assert busy.busiest == max(*busy.stages, busy.dispatcher_link)
    assert all(f >= 0 for f in (*busy.compute, *busy.link, busy.dispatcher_link))
    assert done.span == (5, 9, False)  # 10 requests, a window of 10 or more: no full span
    assert all(0 < p < d for p, d in zip(done.peak_bytes, done.device_bytes, strict=True))
    assert done.window >= 2


@pytest.mark.ray
def test_micro_batches_carry_each_input_through_unmixed(
        runtime: RayRuntime, small: LargeModel, tmp_path: Path) -> None:
    """Requests of 3 inputs each (PipeEdge's micro-batches): the plan's chain is a
    request's (3 inputs' FLOPs), and every row of every result equals the whole model run
    on that input alone."""
    batched = prepare(small.spec, small.index.parent, 1, micro_batch=3)
    assert batched.example.shape[0] == 3
    assert sum(batched.partitioned.chain.flops) == pytest.approx(
        3 * sum(small.partitioned.chain.flops), rel=0.01)
    problem = cluster_problem(runtime.cluster, batched.partitioned.chain, dict.fromkeys(
        (f"pi-{i}" for i in range(4)), 1.0), dispatcher="host")
    plan = get_policy("even")(problem, np.random.default_rng(0))
    inputs = random_inputs(batched.example, 4, seed=5)
    done = serve(runtime, batched, problem, plan, inputs, whole_model_outputs(batched, inputs))
    assert done.run.request_ids == list(range(4)) and plan.n_partitions == 4
    alone = whole_model_outputs(small, [x[i:i + 1] for x in inputs for i in range(3)])
    rows = [out[i:i + 1] for out in done.run.outputs for i in range(3)]
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(rows, alone, strict=True)) <= 1e-4


def test_a_micro_batch_of_no_inputs_is_refused(tmp_path: Path) -> None:
    from edgewise.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 1 input, got 0"):
        prepare(large_spec("vit-huge", **SMALL), tmp_path, 1, micro_batch=0)


@pytest.mark.ray
def test_a_plan_that_does_not_fit_is_refused_naming_device_and_bytes(
        runtime: RayRuntime, small: LargeModel) -> None:
    chain = small.partitioned.chain
    problem = cluster_problem(runtime.cluster, chain, dict.fromkeys(
        ("pi-0", "pi-1", "pi-2", "pi-3"), 1.0), dispatcher="host")
    plan = get_policy("even")(problem, np.random.default_rng(0))
    huge = dataclasses.replace(problem, chain=dataclasses.replace(
        chain, memory_bytes=(2**40,) * chain.n_segments))
    with pytest.raises(InfeasibleError, match=r"needs \d+ bytes; device 'pi-0' has 4294967296"):
        check_memory(runtime, huge, plan)


def _outcome(stages: int, latency_s: float, bottleneck_s: float) -> PipelineOutcome:
    plan = PipelinePlan(tuple(range(stages + 1)), tuple(range(stages)), bottleneck_s, "even")
    return PipelineOutcome("even", plan, (0.0,) * stages, (bottleneck_s,) * stages, 0.0,
                           (0,) * stages, bottleneck_s, 1 / bottleneck_s if bottleneck_s
                           else float("inf"), latency_s)


def test_the_window_keeps_two_requests_per_stage_or_what_littles_law_asks() -> None:
    """16 stages whose planned latency is 16 bottlenecks: Little's law alone would keep 18
    in flight, about one a stage; the floor keeps two a stage plus two. A plan whose latency
    is far longer than its stages (a slow return) gets Little's law's larger window."""
    assert window_for(_outcome(16, 16 * 0.1, 0.1)) == WINDOW_PER_STAGE * 16 + 2 == 34
    assert window_for(_outcome(4, 40 * 0.1, 0.1)) == 42
    assert window_for(_outcome(1, 0.1, 0.1)) == 4
    assert window_for(_outcome(3, 0.0, 0.0)) == 8  # a plan that computes nothing


def test_the_steady_span_leaves_out_the_fill_and_the_drain() -> None:
    """102 requests through a window of 34: from the 34th result (all in flight) to the
    67th, whose return lets the last request in; 24 requests through the same window have
    no steady span: the middle to the last, flagged."""
    from edgewise.pipeline.scale import steady_span

    assert steady_span(34, 102) == (34, 67, True)
    assert steady_span(34, 24) == (12, 23, False)
    assert steady_span(4, 24) == (4, 19, True)


def test_a_request_is_resent_only_after_several_times_its_planned_wait() -> None:
    """One device taking 8 s a request (a micro-batch on a Pi) with 4 in flight: the 4th
    waits about 32 s, queued, not lost; it is re-sent after 4 × (4 × 8 + 8) s, not 30 s.
    Fast plans keep the 30 s floor."""
    from edgewise.pipeline.run import resend_after_s

    assert resend_after_s(_outcome(1, 8.0, 8.0), 4) == 4 * (4 * 8.0 + 8.0)
    assert resend_after_s(_outcome(16, 1.6, 0.1), 34) == 30.0


def test_the_run_json_counts_results_delivered_twice_apart_from_dropped_copies() -> None:
    """``duplicates`` is what the dispatcher yielded twice (request ids seen twice);
    ``duplicates_suppressed`` the late copies it dropped, which keep delivery exactly once."""
    from types import SimpleNamespace

    from edgewise.pipeline.scale_run import run_json

    plan = PipelinePlan((0, 2, 4), (0, 1), 0.1, "even")

    def done(ids: list[int], dropped: int) -> Any:
        run = SimpleNamespace(outputs=[np.zeros(1)] * len(ids), request_ids=ids,
                              duplicates=dropped, restarts=1, throughput_rps=5.0,
                              stage_timings=[{"parameters": 3, "peak_rss_bytes": 2,
                                              "cgroup_peak_bytes": 3, "cgroup_limit_hits": 5},
                                             {"parameters": 4, "peak_rss_bytes": 1}])
        outcome = SimpleNamespace(throughput_rps=10.0, transfer_s=(0.01, 0.02),
                                  compute_s=(0.1, 0.05), return_s=0.03)
        return SimpleNamespace(run=run, busy=Busy((0.5, 0.2), (0.1, 0.6), 0.3),
                               peak_bytes=(3, 1), device_bytes=(4, 4), window=6,
                               max_abs_diff=0.0, outcome=outcome, steady_rps=5.0,
                               span=(1, 2, False))

    setup: Any = SimpleNamespace(runtime=SimpleNamespace(time_dilation=1.0), links="file",
                                 model=SimpleNamespace(example=np.zeros((2, 3, 4, 4))))
    problem: Any = SimpleNamespace(nodes=("a", "b"))
    once = run_json(setup, problem, plan, done([0, 1, 2], dropped=1))
    assert once["duplicates"] == 0 and once["duplicates_suppressed"] == 1
    assert once["requests"] == 3 and once["in_order"]
    assert once["micro_batch"] == 2 and once["steady_inputs_per_s"] == 10.0
    twice = run_json(setup, problem, plan, done([0, 1, 1, 2], dropped=0))
    assert twice["duplicates"] == 1 and twice["duplicates_suppressed"] == 0
    # each stage: compute, its outgoing link (the last's back to the dispatcher), the larger
    assert [(st["compute_busy_fraction"], st["link_busy_fraction"], st["busy_fraction"])
            for st in once["stages"]] == [(0.5, 0.1, 0.5), (0.2, 0.6, 0.6)]
    assert [(st["planned_compute_s"], st["planned_link_s"]) for st in once["stages"]] == [
        (0.1, 0.02), (0.05, 0.03)]
    assert once["dispatcher_link_busy_fraction"] == 0.3
    # a stage on a memory-limited node is set beside its device by the node's cgroup
    assert [(st["peak_memory_bytes"], st["peak_memory_ratio"], st["peak_memory_source"],
             st["peak_rss_bytes"], st.get("cgroup_limit_hits")) for st in once["stages"]] == [
        (3, 0.75, "cgroup", 2, 5), (1, 0.25, "process", 1, None)]
    assert once["planned_dispatcher_link_s"] == 0.01 and once["busiest_fraction"] == 0.6


def test_a_stage_peak_is_the_larger_of_its_process_and_its_nodes_cgroup() -> None:
    assert stage_peak({"peak_rss_bytes": 7.0}) == (7, "process")
    assert stage_peak({"peak_rss_bytes": 7.0, "cgroup_peak_bytes": 9.0,
                       "cgroup_limit_bytes": 16.0}) == (9, "cgroup")
    assert stage_peak({"peak_rss_bytes": 12.0, "cgroup_peak_bytes": 9.0,
                       "cgroup_limit_bytes": 16.0}) == (12, "process")
    assert stage_peak({}) == (0, "process")


def test_busy_fractions_count_compute_and_each_links_bits_over_its_rate() -> None:
    """Two marks 2 s apart: a stage's compute seconds over the span, and each hop's wire
    bits over its rate over the span, the dispatcher's hop first. A stage bound by its
    link is as busy as its link; the busiest resource may be the dispatcher's link."""
    from edgewise.pipeline.scale import _Steady

    steady = _Steady(3, 9, rates_bps=(8e6, 16e6, 8e6))
    steady.marks = [(3, 10.0, [{"compute_s": 0.0}, {"compute_s": 0.5}], [0, 0, 0]),
                    (9, 12.0, [{"compute_s": 1.0}, {"compute_s": 1.5}],
                     [10**6, 4 * 10**6, 500_000])]
    busy = steady.busy()
    assert busy == Busy(compute=(0.5, 0.5), link=(1.0, 0.25), dispatcher_link=0.5)
    assert busy.stages == (1.0, 0.5) and busy.busiest == 1.0
    assert steady.rate() == 3.0  # results 3 .. 9 in 2 s
    assert Busy((0.2,), (0.1,), 0.7).busiest == 0.7
    empty = _Steady(3, 9, rates_bps=(8e6, 8e6)).busy()  # no marks: nothing measured
    assert empty == Busy((0.0,), (0.0,), 0.0)


def test_a_mark_that_finds_a_stage_down_is_taken_at_the_next_result() -> None:
    """A device killed under load: its stage does not answer until its restart, so the
    mark due at result 3 is taken at result 4, the one due at 9 at 9, and the span and the
    rate run between the results the marks were taken at."""
    from edgewise.pipeline.scale import _Steady

    class Down:
        def __init__(self) -> None:
            self.reads: list[Any] = [ray.exceptions.ActorUnavailableError("down", None),
                                     [{"compute_s": 0.0}], [{"compute_s": 1.0}]]

        def stage_timings(self) -> Any:
            read = self.reads.pop(0)
            if isinstance(read, Exception):
                raise read
            return read

        def hop_counts(self) -> list[dict[str, int]]:
            return [{"wire_bytes": 0}, {"wire_bytes": 0}]

    steady, dispatcher = _Steady(3, 9, rates_bps=(8e6, 8e6)), Down()
    for request_id in range(12):
        steady(cast(Any, dispatcher), cast(Any, SimpleNamespace(request_id=request_id)))
    assert [m[0] for m in steady.marks] == [4, 9] and dispatcher.reads == []
    assert steady.span((3, 9, True)) == (4, 9, True)
    assert _Steady(3, 9, rates_bps=(8e6, 8e6)).span((3, 9, True)) == (3, 9, True)


def test_hops_run_from_the_dispatcher_through_the_plans_nodes_and_back() -> None:
    """Matrix row/column 0 is the dispatcher; the plan's node ``i`` is row ``i + 1``."""
    from edgewise.pipeline.scale import hop_rates_bps

    bw = np.array([[0, 10, 20, 30], [10, 0, 40, 50], [20, 40, 0, 60], [30, 50, 60, 0]],
                  dtype=float)
    problem: Any = SimpleNamespace(bandwidth_mbps=bw)
    plan = PipelinePlan((0, 1, 2), (2, 0), 0.1, "even")  # node 2 first, then node 0
    assert hop_rates_bps(problem, plan) == (30e6, 50e6, 10e6)
