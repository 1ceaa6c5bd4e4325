"""The Ekya bench (quick, simulated part) through the kit: every headline figure recomputed
from the sweeps it reports, sweeps cross-checked where they share a point, wall-clock figures
only in ``timings``; and the sensitivity study (``--sweep``), whose default cell is the plain
bench's figure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from edgewise.bench import run_bench
from edgewise.continual import sweep
from edgewise.continual.bench import QUICK, SPEC
from edgewise.continual.defaults import DEFAULTS


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, list[float]]:
    folder = tmp_path_factory.mktemp("plots")
    seen: list[float] = []
    figures = run_bench(SPEC, quick=True, include_real=False, plots_dir=folder,
                        progress=lambda msg, frac: seen.append(frac))
    return figures, folder, seen


def _best_uniform(by_pol: dict[str, list[float]], k: int) -> float:
    return max(v[k] for name, v in by_pol.items() if name.startswith("uniform-"))


def test_gain_figures_are_what_the_streams_sweep_says(quick: Any) -> None:
    f, _, _ = quick
    counts = f["stream_counts"]
    assert counts == list(QUICK.stream_counts) and counts[-1] == DEFAULTS.stressed_streams
    for g, name in (("1", "1_accelerator"), ("2", "2_accelerators")):
        by_pol = f["streams_sweep"][g]
        rel = [(t - _best_uniform(by_pol, k)) / _best_uniform(by_pol, k)
               for k, t in enumerate(by_pol["thief"])]
        pts = [t - _best_uniform(by_pol, k) for k, t in enumerate(by_pol["thief"])]
        assert f["accuracy_gain_by_streams"][g] == pytest.approx(rel)
        assert f["accuracy_gain_by_streams_points"][g] == pytest.approx(pts)
        assert f[f"accuracy_gain_max_over_streams_{name}"] == pytest.approx(max(rel))
        assert f[f"accuracy_gain_max_over_streams_{name}_points"] == pytest.approx(max(pts))
        assert f["accuracy_gain_max_over_streams_at"][g]["relative"] == counts[
            rel.index(max(rel))]
        assert f[f"accuracy_gain_10_streams_{name}"] == pytest.approx(rel[-1])
        assert f["accuracy_gain_by_accelerators"][g] == pytest.approx(rel[-1])
        # a maximum over stream counts is never below its stressed point
        assert f[f"accuracy_gain_max_over_streams_{name}"] >= rel[-1]
    assert f["accuracy_gain_vs_best_uniform"] == f["accuracy_gain_10_streams_1_accelerator"]


def test_sweeps_agree_where_they_share_a_point(quick: Any) -> None:
    f, _, _ = quick
    acc, streams = f["accelerator_sweep"], f["streams_sweep"]
    for g in ("1", "2"):  # 10 streams on g accelerators, in Figure 6's and Figure 7's sweeps
        for name, series in streams[g].items():
            assert series[-1] == acc[name][g]
    for g, row in f["factor_analysis"].items():  # Figure 8 vs Figure 7
        assert row["thief"] == acc["thief"][g]
        assert row["best_uniform"] == max(v[g] for k, v in acc.items() if k != "thief")
    delta = dict(zip(f["delta_sweep"]["delta"], f["delta_sweep"]["accuracy"], strict=True))
    assert delta[DEFAULTS.delta] == acc["thief"]["8"]  # Figure 10 at Δ = 0.1 is Figure 7's
    errors = f["profile_error_sweep"]
    assert errors["accuracy"][errors["profile_error"].index(0.0)] == acc["thief"]["4"]


def test_saving_and_capacity_follow_from_the_sweeps(quick: Any) -> None:
    f, _, _ = quick
    acc = f["accelerator_sweep"]
    target = acc["thief"]["4"]
    reached = [min((float(g) for g, a in v.items() if a >= target - 1e-9), default=None)
               for k, v in acc.items() if k != "thief"]
    found = [g for g in reached if g is not None]
    assert f["gpu_saving_factor"] == (min(found) if found else 16.0) / 4.0
    assert f["gpu_saving_is_lower_bound"] == (not found)
    for name, by_g in f["capacity"].items():
        for g, cap in by_g.items():
            ok = [n for n, a in zip(f["stream_counts"], f["streams_sweep"][g][name],
                                    strict=True) if a >= f["capacity_target"]]
            assert cap == max(ok, default=0)


def test_wall_clock_figures_live_only_in_timings(quick: Any) -> None:
    f, folder, seen = quick
    timings = f["timings"]
    for key in ("thief_decision_seconds", "thief_decision_seconds_max", "simulated_wall_s",
                "bench_seconds"):
        assert timings[key] >= 0.0
    assert len(timings["delta_sweep_decision_s"]) == len(f["delta_sweep"]["delta"])
    assert "decision_s" not in f["delta_sweep"] and "simulated_wall_s" not in f
    # the one wall-clock key an earlier contract reads at the top level, copied and labelled
    assert f["thief_decision_seconds"] == timings["thief_decision_seconds"]
    assert "wall-clock" in f["labels"]["thief_decision_seconds"]
    assert timings["thief_decision_seconds"] <= timings["thief_decision_seconds_max"]
    # decisions are a small part of the simulation that makes them (a ratio in one run)
    assert timings["thief_decision_seconds"] < timings["simulated_wall_s"]
    assert "10 streams" in f["labels"]["accuracy_gain_vs_best_uniform"]
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert sorted(Path(p).name for p in f["plots"]) == sorted(
        p.name for p in folder.glob("*.png"))


def test_the_sweep_moves_no_default_and_draws_its_grid(quick: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    headline, _, _ = quick
    # the quick grid cut to the default cost scale and one heat-map column, to stay fast
    small = replace(sweep.QUICK, cost_scales=(1.0,), shares_per_stream=(0.1,),
                    profile_errors=(0.0,))
    monkeypatch.setattr(sweep, "QUICK", small)
    f = run_bench(SPEC, quick=True, include_real=False, plots_dir=tmp_path,
                  options={"sweep": True})
    study = f["sweep"]
    at_default = study["by_cost_scale"]["protocol"][f"{DEFAULTS.trace_cost_scale:g}"]
    assert study["stream_counts"] == headline["stream_counts"]
    for g, row in at_default.items():
        assert row["relative"] == pytest.approx(headline["accuracy_gain_by_streams"][g])
        assert row["points"] == pytest.approx(headline["accuracy_gain_by_streams_points"][g])
    aware = study["by_cost_scale"]["checkpoint_aware"]["1"]
    for g in ("1", "2"):
        assert aware[g]["relative"][-1] == pytest.approx(
            headline["checkpoint_aware_gain_by_accelerators"][g])
    hm = study["heatmap"]
    assert [len(r) for r in hm["relative"]["protocol"]] == [len(hm["shares_per_stream"])] * len(
        hm["cost_scales"])
    ten = hm["relative"]["protocol"][hm["cost_scales"].index(1.0)][
        hm["shares_per_stream"].index(0.1)]
    assert ten == pytest.approx(headline["accuracy_gain_10_streams_1_accelerator"])
    assert {Path(p).name for p in f["sweep_files"]} == {
        "ekya-sweep.json", "ekya-sweep-streams.png", "ekya-sweep-cost-scale.png",
        "ekya-sweep-heatmap.png"}
    assert "real_window_accuracy_thief" not in f
