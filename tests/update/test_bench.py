"""`edgewise bench deep-edge` on a tiny protocol (small profiles, trial-bounded fits, a few
experiments): what its figures mean, that they repeat for a seed, and that the sweep never
moves a default."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.bench import BenchContext, Figures, run_bench
from edgewise.perf import calibrated_constants as K
from edgewise.perf.calibrated import calibrated
from edgewise.update.bench import QUICK_TRIALS, SPEC, fit_settings, plots
from edgewise.update.defaults import DEFAULTS, HeadlineDefaults
from edgewise.update.protocol import (
    DEVICE_TYPES,
    FIT_TRIALS,
    drawn_experiment,
    perfect_model_figures,
)
from edgewise.update.sweep import SweepAxes, run_sweep
from edgewise.update.sweep_plots import sweep_plots

TINY = {"experiments": 3, "fit_trials": 2, "profile_rows": 400, "fit_budget": None,
        "sweep": False}
WALL_CLOCK = ("solver_seconds_10_devices", "solver_seconds_100_devices",
              "solver_seconds_1000_devices", "fit_seconds", "seconds", "bench_seconds")


@pytest.fixture(scope="module")
def tiny() -> Figures:
    return run_bench(SPEC, seed=0, options=TINY)


def _deterministic(figures: Figures) -> Figures:
    return {k: v for k, v in figures.items() if k not in ("timings", *SPEC.contract_timings)}


def test_figures_repeat_for_a_seed_apart_from_timings(tiny: Figures) -> None:
    again = run_bench(SPEC, seed=0, options=TINY)
    assert _deterministic(again) == _deterministic(tiny)
    assert again["timings"].keys() == tiny["timings"].keys()


def test_wall_clock_figures_are_timings_and_the_contract_key_is_copied(tiny: Figures) -> None:
    assert set(WALL_CLOCK) <= set(tiny["timings"])
    assert not set(WALL_CLOCK) & (set(tiny) - set(SPEC.contract_timings))
    assert tiny["solver_seconds_1000_devices"] == tiny["timings"]["solver_seconds_1000_devices"]
    assert "speedup_perfect_model_mean" in tiny["labels"]


def test_figures_mean_what_they_say(tiny: Figures) -> None:
    per = tiny["speedup_per_experiment"]
    assert tiny["experiments"] == len(per) == TINY["experiments"]
    assert tiny["speedup_mean"] == pytest.approx(np.mean(per), abs=1e-4)
    # deep-edge's plan is one of the plans the exact oracle searches, and its predicted epoch
    # (integer shards) is at least the oracle's continuous optimum
    assert tiny["gap_to_exact_mean"] >= -1e-9 and tiny["gap_to_exact_max"] >= -1e-9
    # planning with the model that scores: deep-edge never exceeds a deadline
    assert tiny["deadline_violations_deep_edge_perfect_model"] == 0
    assert tiny["experiments_infeasible_perfect_model"] == 0
    assert tiny["speedup_perfect_model_mean"] > 1.0
    assert set(tiny["pressure_margin"]) == set(DEVICE_TYPES)
    assert all(0 < m < 0.5 for m in tiny["pressure_margin"].values())
    assert len(tiny["mape_percent"]) == 12  # six functions per device type


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**31))
def test_with_true_models_deep_edge_beats_fair_wherever_fair_keeps_its_deadlines(
        seed: int) -> None:
    """With the truth planning, deep-edge's space holds fair's plan whenever that plan keeps
    every deadline, and deep-edge reaches the exact optimum; only the rounding to whole
    batches (at most one batch per worker, < 2 % of an epoch) can cost it."""
    truth = {t: calibrated(t) for t in DEVICE_TYPES}
    rng = np.random.default_rng(seed)
    for _ in range(6):
        problem, _, _ = drawn_experiment(rng, truth, truth, {}, ("deep-edge",))
        for batch in (16, 32):
            figures = perfect_model_figures(problem, truth, batch, rng)
            assert figures["violations_de_perfect"] == 0
            if figures["violations_fair_perfect"] == 0:
                assert figures["speedup_perfect"] >= 0.98


@pytest.fixture(scope="module")
def before_sweep() -> dict[str, object]:
    return {t: calibrated(t) for t in DEVICE_TYPES}


@pytest.fixture(scope="module")
def tiny_sweep(before_sweep: dict[str, object]) -> Figures:
    axes = SweepAxes((80.0, DEFAULTS.sift_base_ms_nano), (1.0,), (DEFAULTS.cpu_slowdown,),
                     (DEFAULTS.gpu_slowdown,), (32, 64), experiments=3)
    ctx = BenchContext(seed=0, options={**TINY, "experiments": None})
    return run_sweep(ctx, fit_settings(ctx), axes)


def test_the_sweep_maps_its_grid_and_moves_no_default(tiny_sweep: Figures, tiny: Figures,
                                                      before_sweep: dict[str, object]) -> None:
    figures, before = tiny_sweep, before_sweep
    assert HeadlineDefaults() == DEFAULTS and {t: calibrated(t) for t in DEVICE_TYPES} == before
    assert calibrated("jetson-nano").sift_base_ms == K.SIFT_BASE_MS["jetson-nano"]
    grid = figures["grid"]
    assert len(grid) == figures["cells"] == 4
    assert all(c["deadline_violations_deep_edge_perfect_model"] == 0 for c in grid)
    # the two truths differ only in the Nano's SIFT time: one refit, the rest reused
    assert figures["sweep"]["learned_functions_fitted"] == 12 + 1
    # the default cell draws the plain bench's experiments and plans them the same way
    at = figures["at_defaults"]
    assert at["fair_batch"] == DEFAULTS.fair_batch
    assert tiny["experiments_redrawn"] == 0  # so both drew the same experiments
    assert at["speedup_perfect_model_mean"] == tiny["speedup_perfect_model_mean"]
    region = {(c["sift_base_ms_nano"], c["fair_batch"]) for c in figures["region_perfect_model"]}
    assert region == {(c["sift_base_ms_nano"], c["fair_batch"]) for c in grid
                      if c["speedup_perfect_model_mean"] >= 1.54}


def test_sweep_plots_write_the_grid_and_two_heat_maps(tmp_path: Path,
                                                      tiny_sweep: Figures) -> None:
    import matplotlib

    matplotlib.use("Agg")
    figures = tiny_sweep
    out = sweep_plots(figures, tmp_path / "plots")
    assert json.loads(Path(out["sweep_grid_json"]).read_text())["grid"] == figures["grid"]
    for kind in ("perfect", "learned"):
        png = Path(out[f"sweep_heatmap_{kind}_png"])
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_histogram_is_the_plots_part(tmp_path: Path, tiny: Figures) -> None:
    import matplotlib

    matplotlib.use("Agg")
    parts = {k: v for k, v in tiny.items() if k not in ("timings", "labels")}
    out = plots(parts, tmp_path)
    assert out == {"histogram_png": str(tmp_path / "deep-edge-speedup.png")}
    assert Path(out["histogram_png"]).read_bytes()[:4] == b"\x89PNG"


def test_the_default_fit_is_trial_bounded_and_a_budget_is_asked_for() -> None:
    base = {"fit_trials": None, "fit_budget": None, "profile_rows": 1650}
    default = fit_settings(BenchContext(seed=0, options=base))
    assert (default.trials, default.rows) == (FIT_TRIALS, 1650) and FIT_TRIALS == 30
    assert fit_settings(BenchContext(seed=0, quick=True, options=base)).trials == QUICK_TRIALS
    assert fit_settings(BenchContext(seed=0, options={**base, "fit_trials": 5})).trials == 5
    timed = fit_settings(BenchContext(seed=0, options={**base, "fit_budget": 2.5}))
    assert (timed.trials, timed.budget_s) == (None, 2.5)
