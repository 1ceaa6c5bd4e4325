"""Where Deep-Edge's 1.54x headline holds (issue 18): the §V-C protocol over a grid of the
constants the paper leaves open, with learned models and with the true ones.

The axes: the Nano's SIFT base time (the TX2's does not decide anything: its SIFT has room),
a common scale on SIFT's CPU and GPU load weights, the CPU slow-down k_c and the GPU slope
k_g of both Jetsons, and the batch size fair trains at. Each point is a copy of the
calibrated models (``dataclasses.replace``); no default moves (``update.defaults``).

Per point of the ground truth, experiments are drawn as in the bench (SIFT meets its deadline
initially; redrawn while deep-edge with the true models finds no plan), and each is planned
twice: with the true models (δ^a = the deadline) and with models learned from a profile of
that truth (trial-bounded AutoML, functions whose data did not change are reused; δ^a with
the pressure margin). Both are scored by the truth. Where fair finds no plan (no worker has
the memory for its batch) the experiment leaves that cell's means.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import numpy as np

from edgewise.bench import BenchContext, Figures, Ticker
from edgewise.errors import InfeasibleError
from edgewise.perf import calibrated_constants as K
from edgewise.perf.calibrated import CalibratedDevice, calibrated
from edgewise.perf.learned import FitMemo
from edgewise.update.defaults import DEFAULTS
from edgewise.update.policies import REGISTRY
from edgewise.update.problem import UpdateProblem
from edgewise.update.protocol import (
    REPEATABLE_TRIALS,
    FitSettings,
    drawn_experiment,
    learn,
    pressure_margins,
    with_models,
)
from edgewise.update.sim import PlanScore, score

__all__ = ["FULL", "HEADLINE", "QUICK", "SweepAxes", "TruthPoint", "run_sweep", "truth_models"]

HEADLINE = 1.54  # §V-C: "reduced the epoch time by 1.54 times"


@dataclass(frozen=True, slots=True)
class TruthPoint:
    """One ground truth of the sweep: the Nano's SIFT base time (ms), the scale on SIFT's
    load weights, and k_c and k_g of the Jetsons."""

    sift_base_ms_nano: float
    sift_weight_scale: float
    cpu_slowdown: float
    gpu_slowdown: float


@dataclass(frozen=True, slots=True)
class SweepAxes:
    """The grid: every combination of the truth axes, each with every fair batch."""

    sift_base_ms_nano: tuple[float, ...]
    sift_weight_scale: tuple[float, ...]
    cpu_slowdown: tuple[float, ...]
    gpu_slowdown: tuple[float, ...]
    fair_batch: tuple[int, ...]
    experiments: int

    def points(self) -> Iterator[TruthPoint]:
        for values in itertools.product(self.sift_base_ms_nano, self.sift_weight_scale,
                                        self.cpu_slowdown, self.gpu_slowdown):
            yield TruthPoint(*values)

    @property
    def n_points(self) -> int:
        return (len(self.sift_base_ms_nano) * len(self.sift_weight_scale)
                * len(self.cpu_slowdown) * len(self.gpu_slowdown))


_KG = K.GPU_SLOWDOWN
FULL = SweepAxes((80.0, 95.0, 110.0), (0.75, 1.0, 1.25), (0.05, 0.10, 0.20),
                 (_KG, 1.5 * _KG, 2.0 * _KG), (16, 32, 64), 120)
"""Around the defaults: SIFT ±15 ms and ±25 %, k_c halved and doubled, k_g up to twice
Fig. 4's, fair at 16, 32 and 64: 81 truths x 3 batches."""
QUICK = SweepAxes((80.0, 95.0), (1.0,), (0.10,), (_KG, 2.0 * _KG), (16, 32, 64), 30)
"""Four truths x 3 batches, 30 experiments: the default point and the audit's corners."""


def truth_models(point: TruthPoint) -> dict[str, CalibratedDevice]:
    """Copies of the calibrated TX2 and Nano with the point's constants."""
    def varied(model: CalibratedDevice, sift_base_ms: float) -> CalibratedDevice:
        return replace(model, cpu_slowdown=point.cpu_slowdown,
                       gpu_slowdown=point.gpu_slowdown, sift_base_ms=sift_base_ms,
                       sift_cpu_weight=K.SIFT_CPU_WEIGHT * point.sift_weight_scale,
                       sift_gpu_weight=K.SIFT_GPU_WEIGHT * point.sift_weight_scale)

    tx2, nano = calibrated("jetson-tx2"), calibrated("jetson-nano")
    return {"jetson-tx2": varied(tx2, tx2.sift_base_ms),
            "jetson-nano": varied(nano, point.sift_base_ms_nano)}


class _Cell:
    """Running sums of one (truth, fair batch) cell."""

    def __init__(self) -> None:
        self.speedups: dict[str, list[float]] = {"learned": [], "perfect": []}
        self.violations = {"de_learned": 0, "fair_learned": 0, "de_perfect": 0,
                           "fair_perfect": 0}
        self.fair_infeasible = 0

    def add(self, kind: str, de: PlanScore | None, fair: PlanScore | None) -> None:
        if de is None or fair is None:
            self.fair_infeasible += int(kind == "perfect" and fair is None)
            return
        self.speedups[kind].append(fair.epoch_s / de.epoch_s)
        self.violations[f"de_{kind}"] += len(de.violations)
        self.violations[f"fair_{kind}"] += len(fair.violations)

    def figures(self) -> Figures:
        def mean(xs: list[float]) -> float | None:
            return round(statistics.mean(xs), 4) if xs else None

        v = self.violations
        return {"speedup_mean": mean(self.speedups["learned"]),
                "speedup_perfect_model_mean": mean(self.speedups["perfect"]),
                "deadline_violations_deep_edge": v["de_learned"],
                "deadline_violations_fair": v["fair_learned"],
                "deadline_violations_deep_edge_perfect_model": v["de_perfect"],
                "deadline_violations_fair_perfect_model": v["fair_perfect"],
                "experiments_scored": len(self.speedups["learned"]),
                "experiments_scored_perfect_model": len(self.speedups["perfect"]),
                "experiments_fair_infeasible": self.fair_infeasible}


def _plan_score(problem: UpdateProblem, policy: str, truth: dict[str, CalibratedDevice],
                rng: np.random.Generator, scored_on: UpdateProblem) -> PlanScore | None:
    try:
        return score(scored_on, REGISTRY.get(policy)(problem, rng), dict(truth))
    except InfeasibleError:
        return None


def _truth_cells(point: TruthPoint, axes: SweepAxes, fit: FitSettings, seed: int,
                 memo: FitMemo, tick: Ticker) -> list[Figures]:
    """The cells of one ground truth, one per fair batch."""
    truth = truth_models(point)
    learned, profiles = learn(seed, fit, truth, memo)
    margins = pressure_margins(learned, profiles, seed)
    rng = np.random.default_rng(seed)
    cells = {b: _Cell() for b in axes.fair_batch}
    for k in range(axes.experiments):
        tick(f"{_label(point)}: experiment {k + 1}/{axes.experiments}")
        problem, plans, _ = drawn_experiment(rng, dict(truth), dict(truth), {}, ("deep-edge",))
        planned = with_models(problem, dict(learned), margins)
        de = {"perfect": score(problem, plans["deep-edge"], dict(truth)),
              "learned": _plan_score(planned, "deep-edge", truth, rng, problem)}
        for b, cell in cells.items():
            for kind, on in (("perfect", problem), ("learned", planned)):
                fair = _plan_score(replace(on, user_batch=b), "fair", truth, rng, problem)
                cell.add(kind, de[kind], fair)
    mape = max((r["mape_mean"] or 0.0) for m in learned.values() for r in m.mape)
    return [{**asdict(point), "fair_batch": b, **cell.figures(),
             "mape_max_percent": round(mape, 3),
             "pressure_margin": {t: round(v, 4) for t, v in margins.items()}}
            for b, cell in cells.items()]


def _label(point: TruthPoint) -> str:
    return (f"SIFT {point.sift_base_ms_nano:g} ms x{point.sift_weight_scale:g}, "
            f"k_c {point.cpu_slowdown:.2f}, k_g {point.gpu_slowdown:.2f}")


def _is_default(cell: Figures) -> bool:
    return (cell["sift_base_ms_nano"] == DEFAULTS.sift_base_ms_nano
            and cell["sift_weight_scale"] == 1.0
            and math.isclose(cell["cpu_slowdown"], DEFAULTS.cpu_slowdown)
            and math.isclose(cell["gpu_slowdown"], DEFAULTS.gpu_slowdown)
            and cell["fair_batch"] == DEFAULTS.fair_batch)


def _region(grid: list[Figures], key: str) -> list[Figures]:
    axes = ("sift_base_ms_nano", "sift_weight_scale", "cpu_slowdown", "gpu_slowdown",
            "fair_batch")
    return [{a: c[a] for a in axes} | {key: c[key]} for c in grid
            if c[key] is not None and c[key] >= HEADLINE]


def _summary(grid: list[Figures], axes: SweepAxes, fit: FitSettings) -> Figures:
    at_default = [c for c in grid if _is_default(c)]
    perfect, learned = (_region(grid, k) for k in ("speedup_perfect_model_mean", "speedup_mean"))
    return {
        "sweep": {"axes": {k: v for k, v in asdict(axes).items() if k != "experiments"},
                  "experiments_per_cell": axes.experiments, "headline": HEADLINE,
                  "fit": asdict(fit), "defaults": asdict(DEFAULTS)},
        "cells": len(grid),
        "cells_at_least_headline_perfect_model": len(perfect),
        "cells_at_least_headline_learned": len(learned),
        "region_perfect_model": perfect,
        "region_learned": learned,
        "at_defaults": at_default[0] if at_default else None,
        "max_speedup_perfect_model": max((c["speedup_perfect_model_mean"] or 0.0) for c in grid),
        "max_speedup_learned": max((c["speedup_mean"] or 0.0) for c in grid),
        "deadline_violations_deep_edge_perfect_model": sum(
            c["deadline_violations_deep_edge_perfect_model"] for c in grid),
        "deadline_violations_deep_edge": sum(c["deadline_violations_deep_edge"] for c in grid),
        "grid": grid,
    }


def run_sweep(ctx: BenchContext, fit: FitSettings, axes: SweepAxes | None = None) -> Figures:
    """The sweep over ``axes`` (default FULL, QUICK with ``--quick``; ``--experiments``
    overrides the experiments per cell); fits are trial-bounded (``fit.trials``, default
    REPEATABLE_TRIALS) so that functions whose data did not change are reused exactly."""
    axes = axes or (QUICK if ctx.quick else FULL)
    if ctx.option("experiments"):
        axes = replace(axes, experiments=int(ctx.option("experiments")))
    fit = replace(fit, trials=fit.trials or REPEATABLE_TRIALS)
    tick = ctx.ticker(axes.n_points * axes.experiments)
    memo: FitMemo = {}
    grid: list[Figures] = []
    with ctx.timings.timed("sweep_seconds"):
        for point in axes.points():
            grid.extend(_truth_cells(point, axes, fit, ctx.seed, memo, tick))
    figures = _summary(grid, axes, fit)
    figures["sweep"]["learned_functions_fitted"] = len(memo)
    return figures
