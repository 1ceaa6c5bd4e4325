"""The SROLE bench on a tiny protocol, through the kit: its headline keys are what the
plotted curves say, unshielded methods execute what they propose, the shield never adds a
collision, the cluster head does the most look-ups, and the run is deterministic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgewise.bench import BenchContext, run_bench
from edgewise.modelparallel import bench
from edgewise.modelparallel.benchfigs import Protocol, reduction

TINY = Protocol(edges=(5,), workloads=(100.0,), kappas=(50.0, 100.0), pretrain=6, rounds=3)


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    return bench.srole_figures(BenchContext(seed=3), TINY)


def test_headline_reductions_are_those_of_the_plotted_curves(figures: dict[str, Any]) -> None:
    jct = figures["jct_s"]
    models = [m for m in jct if m != "edges"]

    def mean_reduction(ours: str, theirs: str) -> float:
        return float(np.mean([reduction(a, b) for m in models
                              for a, b in zip(jct[m][ours], jct[m][theirs], strict=True)]))

    for ours, theirs in (("srole-c", "marl"), ("srole-d", "marl"), ("srole-c", "rl")):
        key = f"jct_reduction_{ours.replace('-', '_')}_vs_{theirs}"
        assert figures[key] == pytest.approx(mean_reduction(ours, theirs))
    low, high = figures["jct_reduction_srole_c_vs_marl_range"]
    assert low <= figures["jct_reduction_srole_c_vs_marl"] <= high
    at100 = figures["collisions_vs_kappa"]["100"]
    assert figures["collision_reduction_srole_c"] == pytest.approx(
        reduction(at100["srole-c"]["collisions"], at100["marl"]["collisions"]))


def test_unshielded_methods_execute_their_proposal_and_the_shield_adds_no_collision(
        figures: dict[str, Any]) -> None:
    for row in figures["collisions_vs_kappa"].values():
        for name in ("rl", "marl"):
            assert row[name]["collisions"] == row[name]["proposed_collisions"]
        # Algorithm 1 moves a layer only to a node that stays at or below α
        assert row["srole-c"]["collisions"] <= row["srole-c"]["proposed_collisions"]


def test_the_cluster_head_does_the_most_look_ups_and_only_shields_check(
        figures: dict[str, Any]) -> None:
    work = figures["overhead"]
    assert work["rl"]["decision_ops"] > work["marl"]["decision_ops"]  # 3 jobs in turn
    assert work["marl"]["decision_ops"] == work["srole-c"]["decision_ops"]
    assert work["rl"]["shield_ops"] == work["marl"]["shield_ops"] == 0
    assert work["srole-c"]["shield_ops"] > 0 and work["srole-d"]["shield_ops"] > 0
    assert figures["shield_ops_ratio_d_to_c"] == pytest.approx(
        work["srole-d"]["shield_ops"] / work["srole-c"]["shield_ops"])


def test_same_seed_same_figures_and_wall_clock_kept_apart(figures: dict[str, Any]) -> None:
    ctx = BenchContext(seed=3)
    again = bench.srole_figures(ctx, TINY)
    assert again == figures
    assert set(ctx.timings) == {"overhead", "shield_wall_ratio_d_to_c",
                                "shield_seconds_ratio_d_to_c"}
    assert ctx.timings["shield_seconds_ratio_d_to_c"] > 0
    assert not any("wall" in key for key in figures["overhead"]["srole-c"])


def test_partitions_group_every_job_of_the_bench() -> None:
    """--partitions 1: each job is one task, so a device hosts at most its cluster's three
    jobs plus PageRank workers; one task per level puts VGG-16's 16 levels somewhere."""
    one = bench.srole_figures(BenchContext(seed=3), replace(TINY, partitions=1))
    levels = bench.srole_figures(BenchContext(seed=3), TINY)
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
