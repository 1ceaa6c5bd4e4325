"""The SROLE bench on a tiny protocol, through the kit: its headline keys are what the
plotted curves say, unshielded methods execute what they propose, only shields check,
every invalid run is accounted for,
the sweep's default cell is the bench, and the run is deterministic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgewise.bench import BenchContext, run_bench
from edgewise.modelparallel import bench, sweep
from edgewise.modelparallel.benchfigs import METHOD_NAMES, Protocol, reduction
from edgewise.modelparallel.problem import OVERLOAD_MODELS

TINY = Protocol(edges=(5,), workloads=(100.0,), kappas=(50.0, 100.0), pretrain=6, rounds=3)


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    return bench.srole_figures(BenchContext(seed=3), TINY)


def test_headline_reductions_are_those_of_the_plotted_curves(figures: dict[str, Any]) -> None:
    jct = figures["jct_s"]
    models = [m for m in jct if m != "edges"]

    def mean_reduction(ours: str, theirs: str) -> float:
        # the paper's definition, written out here: 1 - JCT(ours) / JCT(theirs), averaged
        # over every model and edge count of the plotted curves
        return float(np.mean([1.0 - a / b for m in models
                              for a, b in zip(jct[m][ours], jct[m][theirs], strict=True)]))

    for ours, theirs in (("srole-c", "marl"), ("srole-d", "marl"), ("srole-c", "rl")):
        key = f"jct_reduction_{ours.replace('-', '_')}_vs_{theirs}"
        assert figures[key] == pytest.approx(mean_reduction(ours, theirs))
    low, high = figures["jct_reduction_srole_c_vs_marl_range"]
    assert low <= figures["jct_reduction_srole_c_vs_marl"] <= high
    at100 = figures["collisions_vs_kappa"]["100"]
    ours_c, theirs_c = at100["srole-c"]["collisions"], at100["marl"]["collisions"]
    assert figures["collision_reduction_srole_c"] == pytest.approx(
        1.0 - ours_c / theirs_c if theirs_c > 0 else 0.0)


def test_a_reduction_is_one_minus_the_ratio() -> None:
    assert reduction(30.0, 40.0) == pytest.approx(0.25)
    assert reduction(50.0, 40.0) == pytest.approx(-0.25)  # worse than theirs: negative
    assert reduction(1.0, 0.0) == 0.0  # nothing to reduce


def test_unshielded_methods_execute_their_proposal(figures: dict[str, Any]) -> None:
    """(That a shield never overloads a node that was fine is a property of Algorithm 1 at
    the demands it sees, test_shield.py; here demands drift after it decides.)"""
    for row in figures["collisions_vs_kappa"].values():
        for name in ("rl", "marl", "iql"):
            assert row[name]["collisions"] == row[name]["proposed_collisions"]


def test_only_shields_check_and_the_ratio_is_theirs(figures: dict[str, Any]) -> None:
    """(Which decider does more look-ups depends on the jobs each must place again.)"""
    work = figures["overhead"]
    assert work["rl"]["shield_ops"] == work["marl"]["shield_ops"] == 0
    assert work["srole-c"]["shield_ops"] > 0 and work["srole-d"]["shield_ops"] > 0
    assert all(w["decision_ops"] > 0 for w in work.values())
    assert figures["shield_ops_ratio_d_to_c"] == pytest.approx(
        work["srole-d"]["shield_ops"] / work["srole-c"]["shield_ops"])


def test_every_failed_run_is_a_re_placement_or_a_job_given_up(
        figures: dict[str, Any]) -> None:
    """Under processor sharing a run fails only for memory (§IV-B) or a shield's deferral;
    each failure is followed by a placement again, or the job is given up."""
    memory = figures["invalid_memory_schedules_run_by_method"]
    for n in METHOD_NAMES:
        failed = memory[n] + figures["deferred_by_shield_by_method"][n]
        assert failed == figures["re_placed_by_method"][n] + figures["never_run_by_method"][n]
    assert figures["invalid_memory_schedules_run"] == memory["srole-c"] + memory["srole-d"] == 0
    assert len(set(figures["jobs_by_method"].values())) == 1  # the same rounds for all
    assert figures["marl_kind"] == "cq-learning" and figures["bandwidth_in_state"] is True


def test_the_sweeps_default_cell_is_the_bench(figures: dict[str, Any], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "QUICK_INTENSITIES", (1.0,))
    grid = sweep.sweep_figures(BenchContext(seed=3, quick=True), TINY)["sweep"]
    assert grid["overload_models"] == list(OVERLOAD_MODELS) and grid["intensities"] == [1.0]
    default, = (c for c in grid["cells"] if c["overload"] == "processor-sharing")
    assert default["jct_s"] == {m: {n: v[0] for n, v in per.items()}
                                for m, per in figures["jct_s"].items() if m != "edges"}
    key = "jct_reduction_srole_c_vs_marl"
    assert grid["grid"][key] == [[c[key]] for c in grid["cells"]]
    for cell in grid["cells"]:  # only the invalid model makes CPU or bandwidth invalid
        cpu = sum(cell["runs"][n].get("invalid_cpu_runs", 0) for n in METHOD_NAMES)
        assert cpu == 0 or cell["overload"] == "invalid"
    import matplotlib

    matplotlib.use("Agg")
    from edgewise.modelparallel.plots import plots

    drawn = plots({"sweep": grid}, tmp_path)["plots"]
    assert [Path(p).name for p in drawn] == ["sweep.png"]
    assert Path(drawn[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_seed_same_figures_and_wall_clock_kept_apart(figures: dict[str, Any]) -> None:
    ctx = BenchContext(seed=3)
    again = bench.srole_figures(ctx, TINY)
    assert again == figures
    assert set(ctx.timings) == {"overhead", "shield_wall_ratio_d_to_c",
                                "shield_seconds_ratio_d_to_c"}
    assert ctx.timings["shield_seconds_ratio_d_to_c"] > 0
    assert not any("wall" in key for key in figures["overhead"]["srole-c"])


def test_partitions_group_every_job_of_the_bench(figures: dict[str, Any]) -> None:
    """--partitions 1: each job is one task, so a device hosts at most its cluster's three
    jobs plus PageRank workers; one task per level puts VGG-16's 16 levels somewhere."""
    one = bench.srole_figures(BenchContext(seed=3), replace(TINY, partitions=1))
    levels = figures
    assert one["protocol"]["partitions"] == 1 and levels["protocol"]["partitions"] is None

    def most_tasks(result: dict[str, Any]) -> int:
        return max(row["tasks_max"] for per_method in result["load"]["vgg-16"].values()
                   for row in per_method.values())

    pagerank_workers_max = 6 * 3  # 100 % workload: 6 jobs × 3 workers, all on one node at most
    assert most_tasks(one) <= 3 + pagerank_workers_max
    assert most_tasks(levels) > most_tasks(one)


def test_the_kit_runs_the_spec_with_plots_timings_and_labels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "protocol", lambda quick: TINY)
    seen: list[float] = []
    out = run_bench(bench.SPEC, seed=3, include_real=False, plots_dir=tmp_path,
                    options={"partitions": 2}, progress=lambda _m, f: seen.append(f))
    assert out["protocol"]["partitions"] == 2
    assert out["shield_seconds_ratio_d_to_c"] == out["timings"]["shield_seconds_ratio_d_to_c"]
    assert "shield_seconds_ratio_d_to_c" in out["labels"]
    assert seen == sorted(seen) and seen[-1] == 1.0
    written = sorted(Path(p).name for p in out["plots"])
    assert written == ["collisions.png", "jct.png", "overhead.png", "tasks.png",
                       "utilisation.png"]
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in out["plots"])
