"""The Ekya bench (quick mode, simulated figures only) and its plots."""

from __future__ import annotations

from pathlib import Path

from edgewise.continual.bench import run_ekya_bench


def test_quick_bench_reports_every_figure(tmp_path: Path) -> None:
    seen: list[float] = []
    result = run_ekya_bench(seed=0, quick=True, include_real=False,
                            progress=lambda msg, frac: seen.append(frac), plots_dir=tmp_path)
    for key in ("accuracy_gain_vs_best_uniform", "gpu_saving_factor", "thief_decision_seconds"):
        assert isinstance(result[key], float)
    assert 0.0 < result["thief_decision_seconds"] < 2.0  # type: ignore[operator]
    assert result["gpu_saving_factor"] >= 1.0  # type: ignore[operator]
    sweep = result["accelerator_sweep"]
    assert isinstance(sweep, dict) and "thief" in sweep and len(sweep) == 6
    thief = list(sweep["thief"].values())
    assert thief == sorted(thief)  # more accelerators never hurt on this trace
    factors = result["factor_analysis"]
    assert isinstance(factors, dict) and set(factors["4"]) == {
        "thief", "fixed_res", "fixed_config", "best_uniform"}
    assert len(result["delta_sweep"]["accuracy"]) == 4  # type: ignore[index]
    assert seen and seen == sorted(seen) and seen[-1] <= 1.0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "ekya-accelerators.png", "ekya-delta.png", "ekya-factors.png", "ekya-streams.png"]
