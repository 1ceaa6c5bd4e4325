"""The okita BenchSpec through the kit's driver, quick and without the real run: the ratio
against the optimum, the cost reductions, wall-clock figures apart, labels and the plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

from edgewise.bench import run_bench
from edgewise.sites.bench import ONLINE, SPEC


def test_quick_bench_means_what_it_says(tmp_path: Path) -> None:
    seen: list[tuple[str, float]] = []
    report = run_bench(SPEC, seed=1, quick=True, include_real=False, plots_dir=tmp_path,
                       progress=lambda msg, f: seen.append((msg, f)))
    ratio = report["performance_ratio"]
    assert report["performance_ratio_mean"] >= 1.0 - 1e-9  # no online plan beats the optimum
    assert report["performance_ratio_mean"] <= report["performance_ratio_max"]
    kept = [row["okita"] for row in ratio["instances"] if "okita" in row]
    assert report["performance_ratio_max"] <= max(kept) + 1e-12
    default = report["default"]
    assert set(default) == set(ONLINE)
    for b in ("fifo", "drf", "oasis"):
        assert math.isclose(report[f"cost_reduction_vs_{b}"],
                            1 - default["okita"]["total"] / default[b]["total"])
    # the default scenario is also the last point of both sweeps (same seed, same sizes)
    assert report["cost_vs_jobs"][16]["okita"] == default["okita"]["total"]
    assert report["cost_vs_sites"][12] == {p: default[p]["total"] for p in ONLINE}
    assert "real_run_final_accuracy" not in report
    # wall-clock figures only in timings; the one issue 7 reads is copied and labelled
    timings = report["timings"]
    assert report["runtime_seconds_default_scenario"] == \
        timings["runtime_seconds_default_scenario"] == timings["default"]["okita"]["runtime_s"]
    assert "runtime_vs_jobs" not in report and set(timings["runtime_vs_jobs"]) == {8, 16}
    assert all("runtime_s" not in row for row in default.values())
    assert "runtime_seconds_default_scenario" in report["labels"]
    assert "no cap" in report["labels"]["cost_reduction_vs_fifo"]
    assert json.loads(json.dumps(report))["default_scenario"]["n_sites"] == 12   # --json
    assert [f for _, f in seen] == sorted(f for _, f in seen) and seen[-1] == ("done", 1.0)
    plots = report["plots"]
    assert len(plots) == 7 and all(Path(p).parent == tmp_path for p in plots)
    assert all(Path(p).stat().st_size > 1000 for p in plots)
