"""`edgewise bench deep-edge`: the §V-C protocol of the Deep-Edge paper.

1. Ground truth: the calibrated profiles of the Jetson TX2 and Nano (``perf.calibrated``).
2. Learned models: per device type, a profile of ``profile_rows`` (1,650) noisy samples is
   drawn from the ground truth and the paper's functions are fitted by AutoML (FLAML) with
   a time budget (or a number of trials); their held-out MAPE is reported (Table I).
3. ``experiments`` random experiments on the testbed (1 TX2 + 3 Nano workers with SIFT and
   random stressors that keep SIFT within its deadline initially; a Raspberry Pi 4 server):
   deep-edge and fair plan with the learned models; both plans are scored by the ground truth
   (epoch time, deadline misses); the speedup is fair's epoch time over deep-edge's. SIFT's
   pressure threshold is δ^a = deadline / (1 + margin), the margin being the held-out MAPE of
   the pressure estimate EstExecTime(EstState(X, b)) within the memory limit
   (``protocol.pressure_margins``): the paper bounds pressure by δ^a "in order not to violate
   the SLO" (§III-B) with EstExecTime models of 1.5–1.7 % MAPE (Table I); ours err more.
   The same experiments are planned again with the true models (δ^a = the deadline): the
   perfect-model speedup, an upper bound for any learned model.
4. The exact oracle plans each experiment with the same learned models; the gap is deep-edge's
   predicted epoch time over the oracle's minus one.
5. Solver time of deep-edge for random clusters of 10, 100 and 1000 devices (timings).

``--sweep`` runs the sensitivity study of ``update.sweep`` instead.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.errors import InfeasibleError
from edgewise.perf.calibrated import calibrated
from edgewise.perf.learned import LearnedDevice
from edgewise.update.experiments import random_cluster_problem
from edgewise.update.policies import REGISTRY
from edgewise.update.protocol import (
    DEVICE_TYPES,
    FIT_TRIALS,
    REPEATABLE_TRIALS,
    FitSettings,
    Models,
    drawn_experiment,
    fair_on,
    learn,
    perfect_model_figures,
    pressure_margins,
)
from edgewise.update.sim import score

__all__ = ["EXPERIMENTS", "QUICK_EXPERIMENTS", "QUICK_TRIALS", "SPEC", "fit_settings",
           "plots", "simulated"]

EXPERIMENTS = 120  # §V-C: "We performed 120 random experiments"
QUICK_EXPERIMENTS = 24
QUICK_TRIALS = REPEATABLE_TRIALS  # with --quick, fits are trial-bounded (repeatable)


def _experiment(rng: np.random.Generator, learned: Models, truth: Models,
                margins: dict[str, float]) -> dict[str, float]:
    """One experiment; redrawn while no plan can keep every deadline (the paper only ran
    experiments whose model update was feasible). Literal Algorithm 1 may still find none."""
    problem, plans, redraws = drawn_experiment(rng, learned, truth, margins,
                                               ("deep-edge", "fair", "exact"))
    try:
        literal = REGISTRY.get("deep-edge-literal")(problem, rng)
    except InfeasibleError:
        literal = None
    plans["fair-same-devices"] = fair_on(problem, plans["deep-edge"].workers, rng)
    sims = {n: score(problem, p, truth) for n, p in plans.items() if n != "exact"}
    fair, exact = sims["fair"].epoch_s, plans["exact"].predicted_epoch_s
    lit = score(problem, literal, truth) if literal else None
    return {"speedup": fair / sims["deep-edge"].epoch_s,
            "epoch_fair": fair, "epoch_de": sims["deep-edge"].epoch_s,
            "speedup_literal": fair / lit.epoch_s if lit else float("nan"),
            "speedup_same_devices": sims["fair-same-devices"].epoch_s / sims["deep-edge"].epoch_s,
            "violations_de": len(sims["deep-edge"].violations),
            "violations_literal": len(lit.violations) if lit else 0,
            "violations_fair": len(sims["fair"].violations),
            "workers_de": len(plans["deep-edge"].workers), "redraws": redraws,
            "gap": plans["deep-edge"].predicted_epoch_s / exact - 1,
            "gap_literal": literal.predicted_epoch_s / exact - 1 if literal else float("nan"),
            **perfect_model_figures(problem, truth, problem.user_batch, rng)}


def _literal_summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """Figures of the paper's Algorithm 1 taken literally (no batch shrinking for pressure)."""
    ok = [r for r in rows if not np.isnan(r["speedup_literal"])]

    def mean(key: str) -> float:
        return round(statistics.mean(r[key] for r in ok), 5) if ok else 0.0

    return {"infeasible_experiments": len(rows) - len(ok),
            "speedup_mean": mean("speedup_literal"),
            "deadline_violations": int(sum(r["violations_literal"] for r in ok)),
            "gap_to_exact_mean": mean("gap_literal")}


def _perfect_summary(rows: list[dict[str, float]]) -> Figures:
    """Both policies planning with the true models, over the same experiments."""
    ok = [r["speedup_perfect"] for r in rows if not np.isnan(r["speedup_perfect"])]
    return {
        "speedup_perfect_model_mean": round(statistics.mean(ok), 4) if ok else None,
        "speedup_perfect_model_median": round(statistics.median(ok), 4) if ok else None,
        "experiments_infeasible_perfect_model": len(rows) - len(ok),
        "deadline_violations_deep_edge_perfect_model":
            int(sum(r["violations_de_perfect"] for r in rows)),
        "deadline_violations_fair_perfect_model":
            int(sum(r["violations_fair_perfect"] for r in rows)),
    }


def _speedup_figures(rows: list[dict[str, float]]) -> Figures:
    speedups = [r["speedup"] for r in rows]
    return {
        "experiments": len(rows),
        "speedup_mean": round(statistics.mean(speedups), 4),
        **_perfect_summary(rows),
        "speedup_median": round(statistics.median(speedups), 4),
        "speedup_max": round(max(speedups), 4),
        "speedup_of_mean_epoch_times": round(statistics.mean(r["epoch_fair"] for r in rows)
                                             / statistics.mean(r["epoch_de"] for r in rows), 4),
        "speedup_over_1_5_fraction": round(sum(s > 1.5 for s in speedups) / len(rows), 4),
        "speedup_per_experiment": [round(s, 4) for s in speedups],
    }


def _figures(rows: list[dict[str, float]], learned: Mapping[str, LearnedDevice],
             margins: dict[str, float]) -> Figures:
    mape = [row for m in learned.values() for row in m.mape]
    return {
        **_speedup_figures(rows),
        "deadline_violations_deep_edge": int(sum(r["violations_de"] for r in rows)),
        "deadline_violations_fair": int(sum(r["violations_fair"] for r in rows)),
        "experiments_redrawn": int(sum(r["redraws"] for r in rows)),
        "speedup_mean_where_fair_meets_deadlines": round(statistics.mean(
            [r["speedup"] for r in rows if r["violations_fair"] == 0] or [float("nan")]), 4),
        "speedup_mean_vs_fair_on_deep_edge_devices": round(
            statistics.mean(r["speedup_same_devices"] for r in rows), 4),
        "literal_algorithm_1": _literal_summary(rows),
        "pressure_margin": {k: round(v, 4) for k, v in margins.items()},
        "experiments_fair_violating": int(sum(r["violations_fair"] > 0 for r in rows)),
        "gap_to_exact_mean": round(statistics.mean(r["gap"] for r in rows), 5),
        "gap_to_exact_max": round(max(r["gap"] for r in rows), 5),
        "mean_workers_deep_edge": round(statistics.mean(r["workers_de"] for r in rows), 3),
        "mape_percent": {f"{r['device']}/{r['function']}": r["mape_mean"] for r in mape},
        "mape_max_percent": max((r["mape_mean"] or 0.0) for r in mape),
    }


def _solver_seconds(n: int, rng: np.random.Generator, learned: Models, truth: Models) -> float:
    """Median of three timed solves of one random n-device problem (one timing on a shared
    2-core host is easily doubled by another process)."""
    problem = random_cluster_problem(n, rng, learned, truth)
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        REGISTRY.get("deep-edge")(problem, rng)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def fit_settings(ctx: BenchContext) -> FitSettings:
    """The learned models' fit: ``--fit-budget`` seconds per function when given, else
    ``--fit-trials`` trials per function (default FIT_TRIALS, QUICK_TRIALS with --quick)."""
    rows, budget = int(ctx.option("profile_rows")), ctx.option("fit_budget")
    if budget is not None:
        return FitSettings(rows=rows, budget_s=float(budget), trials=None)
    trials = ctx.option("fit_trials") or (QUICK_TRIALS if ctx.quick else FIT_TRIALS)
    return FitSettings(rows=rows, trials=int(trials))


def simulated(ctx: BenchContext) -> Figures:
    """The protocol above (or the sweep, with ``--sweep``); wall-clock figures go to
    ``ctx.timings``."""
    if ctx.option("sweep"):
        from edgewise.update.sweep import run_sweep

        return run_sweep(ctx, fit_settings(ctx))
    experiments = ctx.option("experiments") or (QUICK_EXPERIMENTS if ctx.quick else EXPERIMENTS)
    tick = ctx.ticker(experiments + 2)
    truth: Models = {t: calibrated(t) for t in DEVICE_TYPES}
    started = time.perf_counter()
    tick("fitting the performance and interference models (AutoML)")
    with ctx.timings.timed("fit_seconds"):
        learned, profiles = learn(ctx.seed, fit_settings(ctx))
    margins = pressure_margins(learned, profiles, ctx.seed)
    rng = np.random.default_rng(ctx.seed)
    rows = []
    for k in range(experiments):
        tick(f"experiment {k + 1}/{experiments}")
        rows.append(_experiment(rng, dict(learned), truth, margins))
    tick("solver timing")
    for n in (10, 100, 1000):
        ctx.timings[f"solver_seconds_{n}_devices"] = round(
            _solver_seconds(n, rng, dict(learned), truth), 4)
    ctx.timings["seconds"] = round(time.perf_counter() - started, 1)
    return _figures(rows, learned, margins)


def plots(figures: Figures, folder: Path) -> Figures:
    """The speedup histogram (Fig. 11's distribution), or the sweep's heat maps and grid."""
    if "grid" in figures:
        from edgewise.update.sweep_plots import sweep_plots

        return sweep_plots(figures, folder)
    import matplotlib.pyplot as plt

    speedups = figures["speedup_per_experiment"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(speedups, bins=20, color="#4477aa", edgecolor="white")
    ax.axvline(statistics.mean(speedups), color="black", linestyle="--", label="mean")
    ax.set_xlabel("epoch-time speedup of deep-edge over fair")
    ax.set_ylabel("experiments")
    ax.legend()
    fig.tight_layout()
    path = folder / "deep-edge-speedup.png"
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"histogram_png": str(path)}


_GROUND_TRUTH = ("the calibrated profiles (formulas anchored on the paper's figures, not "
                 "measurements) score the plans")

SPEC = BenchSpec(
    name="deep-edge",
    title="Deep-Edge §V-C: deep-edge vs fair on random testbed experiments, gap to the exact "
          "oracle, solver time, model MAPE; --sweep: where the 1.54x headline holds.",
    simulated="edgewise.update.bench:simulated",
    plots="edgewise.update.bench:plots",
    options=(
        BenchOption("experiments", None, f"random experiments (default {EXPERIMENTS}; "
                    f"{QUICK_EXPERIMENTS} with --quick)", minimum=1, maximum=10000),
        BenchOption("fit_budget", None, "fit each function for this many AutoML seconds "
                    "instead of a number of trials (how many trials that buys depends on the "
                    "host's load: not repeatable)", kind="float", minimum=0.5),
        BenchOption("fit_trials", None, f"AutoML trials per learned function (default "
                    f"{FIT_TRIALS}, as `edgewise update fit`; --quick: {QUICK_TRIALS}); "
                    "repeatable", minimum=1, maximum=1000),
        BenchOption("profile_rows", 1650, "profile rows per device type the learned models "
                    "are fitted on (Table I: 1,386 train + 264 test)", minimum=100,
                    maximum=100_000),
        BenchOption("sweep", False, "sensitivity study: SIFT base time and load weights, k_c, "
                    "k_g, fair's batch; a JSON grid and heat maps", kind="bool"),
    ),
    labels={
        "speedup_mean": f"learned models plan; {_GROUND_TRUTH}",
        "speedup_perfect_model_mean": "both policies plan with the calibrated profiles "
                                      f"themselves (an upper bound for any learned model); "
                                      f"{_GROUND_TRUTH}",
        "gap_to_exact_mean": "epoch times both plans' learned models predict, not the ground "
                             "truth's",
        "mape_percent": "held-out error on profiles sampled from the calibrated formulas with "
                        "noise within Table I's, not on measured profiles",
    },
    contract_timings=("solver_seconds_1000_devices",),
)
"""``edgewise bench deep-edge``."""
