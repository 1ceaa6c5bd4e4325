"""The benchmark's quick mode: its keys, the ratio against the optimum, and the plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

from edgewise.sites.bench import ONLINE, run_okita_bench


def test_quick_bench_reports_the_issue_keys(tmp_path: Path) -> None:
    seen: list[str] = []
    report = run_okita_bench(seed=1, quick=True, include_real=False,
                             progress=lambda msg, _f: seen.append(msg), plots_dir=tmp_path)
    figures = {}
    for key in ("performance_ratio_max", "performance_ratio_mean", "cost_reduction_vs_fifo",
                "cost_reduction_vs_drf", "cost_reduction_vs_oasis",
                "runtime_seconds_default_scenario"):
        value = report[key]
        assert isinstance(value, float) and math.isfinite(value), key
        figures[key] = value
    assert figures["performance_ratio_mean"] >= 1.0 - 1e-9  # no online plan beats the optimum
    assert figures["performance_ratio_mean"] <= figures["performance_ratio_max"]
    default = report["default"]
    assert isinstance(default, dict) and set(default) == set(ONLINE)
    okita = default["okita"]["total"]
    assert math.isclose(figures["cost_reduction_vs_drf"], 1 - okita / default["drf"]["total"])
    assert "real_run_final_accuracy" not in report
    assert json.loads(json.dumps(report))["default_scenario"]["n_sites"] == 12   # --json
    assert seen[-1] == "done"
    plots = report["plots"]
    assert isinstance(plots, list) and len(plots) == 7
    assert all(Path(p).stat().st_size > 1000 for p in plots)
