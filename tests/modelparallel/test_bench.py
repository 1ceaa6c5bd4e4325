"""The SROLE bench on a tiny protocol: every headline key, same seed same numbers, plots."""

from __future__ import annotations

from pathlib import Path

from edgewise.modelparallel.bench import Protocol, run_srole_bench

TINY = Protocol(edges=(5,), workloads=(100.0,), kappas=(50.0, 100.0), pretrain=6, rounds=3)
WALL = ("wall_s", "wall_ratio_d_to_c", "bench_seconds", "plots", "shield_seconds_ratio_d_to_c",
        "shield_fastest_s")


def _deterministic(x: object) -> object:
    if isinstance(x, dict):
        return {k: _deterministic(v) for k, v in x.items() if not k.endswith(WALL)}
    return x


def test_tiny_bench_is_deterministic_and_has_its_keys(tmp_path: Path) -> None:
    seen: list[float] = []
    a = run_srole_bench(seed=3, include_real=False, protocol=TINY, plots_dir=tmp_path,
                        progress=lambda _m, f: seen.append(f))
    b = run_srole_bench(seed=3, include_real=False, protocol=TINY)
    assert _deterministic(a) == _deterministic(b)
    for key in ("jct_reduction_srole_c_vs_marl", "jct_reduction_srole_d_vs_marl",
                "jct_reduction_srole_c_vs_rl", "collision_reduction_srole_c",
                "collision_reduction_srole_d", "shield_seconds_ratio_d_to_c"):
        assert isinstance(a[key], float), key
    ratio = a["shield_seconds_ratio_d_to_c"]
    assert isinstance(ratio, float) and ratio > 0
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "collisions.png", "jct.png", "overhead.png", "tasks.png", "utilisation.png"]


def test_partitions_group_every_job_of_the_bench() -> None:
    """--partitions 1: each job is one task, so a device hosts at most its cluster's three
    jobs plus PageRank workers; one task per level puts VGG-16's 16 levels somewhere."""
    from dataclasses import replace

    one = run_srole_bench(seed=3, include_real=False, protocol=replace(TINY, partitions=1))
    assert _deterministic(run_srole_bench(seed=3, include_real=False, protocol=TINY,
                                          partitions=1)) == _deterministic(one)
    levels = run_srole_bench(seed=3, include_real=False, protocol=TINY)
    assert one["protocol"]["partitions"] == 1  # type: ignore[index]
    assert levels["protocol"]["partitions"] is None  # type: ignore[index]

    def most_tasks(result: dict[str, object]) -> int:
        load = result["load"]
        assert isinstance(load, dict)
        return max(row["tasks_max"] for per_method in load["vgg-16"].values()
                   for row in per_method.values())

    pagerank_workers_max = 6 * 3  # 100 % workload: 6 jobs × 3 workers, all on one node at most
    assert most_tasks(one) <= 3 + pagerank_workers_max
    assert most_tasks(levels) > most_tasks(one)
