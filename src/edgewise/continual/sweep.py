"""Where Ekya's headline holds (``edgewise bench ekya --sweep``): the thief's gain over the best
uniform baseline by stream count, against the accelerator share per stream and the trace's
retraining-cost scale (which the paper does not pin), with §5's options beside the protocol.

Every point is a copy of the defaults (``continual.defaults``) with one or two constants
changed; the defaults themselves never move, and the sweep's cell at the defaults is the
plain bench's figure (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edgewise.bench import BenchContext, Figures, Ticker
from edgewise.continual.defaults import DEFAULTS, BenchDefaults
from edgewise.continual.setting import Setting
from edgewise.continual.sim import simulate
from edgewise.continual.traces import default_trace, default_trace_source

__all__ = ["FULL", "PAPER_GAINS", "QUICK", "VARIANTS", "SweepGrid", "gain_point", "sweep_figures"]

VARIANTS: dict[str, tuple[str, bool]] = {
    "protocol": ("thief", False),  # the paper's: the old model serves until retraining ends
    "checkpoints_served": ("thief", True),  # every policy hot-loads checkpoints (§5)
    "checkpoint_aware": ("thief-checkpoints", True),  # ... and the thief plans with them
}
"""Variant → (the thief's planner, whether inference serves checkpoints for every policy)."""

PAPER_GAINS = {"1": 0.29, "2": 0.23}
"""§6.2: "upto 29% under 1 GPU and 23% under 2 GPU" (accelerators → relative gain)."""


@dataclass(frozen=True, slots=True)
class SweepGrid:
    """The points swept: stream counts (at the headline's accelerators), cost scales, the
    accelerator shares per stream of the heat map (at the stressed stream count), the
    micro-profiler errors and seeds of the re-estimation study, and every how many epochs
    a running retraining is re-estimated (§5: "every few epochs")."""

    stream_counts: tuple[int, ...]
    cost_scales: tuple[float, ...]
    shares_per_stream: tuple[float, ...]
    heatmap_variants: tuple[str, ...]
    profile_errors: tuple[float, ...]
    error_seeds: int
    reestimate_epochs: int = 5
    windows: int | None = None  # None: all of the trace's


FULL = SweepGrid(tuple(range(1, 11)), (0.25, 0.5, 1.0, 2.0, 4.0),
                 (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8),
                 ("protocol", "checkpoint_aware"), DEFAULTS.profile_errors, 3)
QUICK = SweepGrid((2, 6, 10), (0.5, 1.0, 2.0), (0.1, 0.2), ("protocol",), (0.0, 0.1), 1,
                  windows=2)


def gain_point(s: Setting, streams: int, accelerators: float, variant: str) -> dict[str, float]:
    """Thief vs the best uniform baseline at one point: both accuracies, the gain relative
    to the best uniform and in accuracy points."""
    planner, served = VARIANTS[variant]
    thief = s.accuracy(planner, streams, accelerators, serve_checkpoints=served)
    best = max(s.accuracy(p, streams, accelerators, serve_checkpoints=served)
               for p in s.uniform.values())
    return {"thief": thief, "best_uniform": best, "relative": (thief - best) / best,
            "points": thief - best}


def _by_streams(s: Setting, grid: SweepGrid, variant: str, g: float) -> dict[str, object]:
    points = [gain_point(s, n, g, variant) for n in grid.stream_counts]
    out: dict[str, object] = {k: [p[k] for p in points]
                              for k in ("thief", "best_uniform", "relative", "points")}
    out["share_per_stream"] = [g / n for n in grid.stream_counts]
    for reading in ("relative", "points"):
        values = [p[reading] for p in points]
        out[f"max_{reading}"] = max(values)
        out[f"max_{reading}_at_streams"] = grid.stream_counts[int(np.argmax(values))]
    return out


def _streams_and_scales(grid: SweepGrid, windows: int, tick: Ticker) -> dict[str, object]:
    """The gain by stream count at the headline's accelerators, for every variant and cost
    scale (the cost scale 1.0 rows are the plain bench's Figure 6)."""
    out: dict[str, dict[str, dict[str, object]]] = {v: {} for v in VARIANTS}
    for scale in grid.cost_scales:
        s = Setting(replace(DEFAULTS, trace_cost_scale=scale), windows)
        for variant in VARIANTS:
            tick(f"streams × cost scale {scale:g}, {variant}")
            out[variant][f"{scale:g}"] = {
                f"{g:g}": _by_streams(s, grid, variant, g)
                for g in DEFAULTS.headline_accelerators}
    return {"by_cost_scale": out}


def _heatmap(grid: SweepGrid, windows: int, tick: Ticker) -> dict[str, object]:
    """The gain at the stressed stream count over accelerator share per stream × cost scale."""
    n = DEFAULTS.stressed_streams
    rel: dict[str, list[list[float]]] = {v: [] for v in grid.heatmap_variants}
    pts: dict[str, list[list[float]]] = {v: [] for v in grid.heatmap_variants}
    for scale in grid.cost_scales:
        s = Setting(replace(DEFAULTS, trace_cost_scale=scale), windows)
        for variant in grid.heatmap_variants:
            tick(f"heat map, cost scale {scale:g}, {variant}")
            row = [gain_point(s, n, share * n, variant) for share in grid.shares_per_stream]
            rel[variant].append([p["relative"] for p in row])
            pts[variant].append([p["points"] for p in row])
    return {"streams": n, "shares_per_stream": list(grid.shares_per_stream),
            "cost_scales": list(grid.cost_scales), "relative": rel, "points": pts}


def _reestimation(grid: SweepGrid, windows: int, seed: int, tick: Ticker) -> dict[str, object]:
    """§5's re-estimation during retraining against the micro-profiler's error (Figure 11b's
    setting: stressed streams, 4 accelerators), mean over ``error_seeds`` noise draws."""
    tick("re-estimation vs profile error")
    problem = Setting(DEFAULTS, windows).problem(DEFAULTS.stressed_streams, 4.0)
    out: dict[str, list[float]] = {"thief": [], "thief_reestimating": []}
    for sigma in grid.profile_errors:
        for key, k in (("thief", 0), ("thief_reestimating", grid.reestimate_epochs)):
            runs = [simulate(problem, "thief", seed=seed + i, profile_error=sigma,
                             reestimate_epochs=k).mean_accuracy
                    for i in range(grid.error_seeds)]
            out[key].append(float(np.mean(runs)))
    return {"profile_error": list(grid.profile_errors), "accuracy": out,
            "reestimate_epochs": grid.reestimate_epochs, "seeds": grid.error_seeds}


def sweep_figures(ctx: BenchContext) -> Figures:
    """The whole study as one JSON-able object under ``sweep`` (plots: ``sweep_plots``)."""
    grid = QUICK if ctx.quick else FULL
    windows = grid.windows or default_trace().windows
    tick = ctx.ticker(len(grid.cost_scales) * (len(VARIANTS) + len(grid.heatmap_variants)) + 1)
    study: dict[str, object] = {
        "stream_counts": list(grid.stream_counts),
        "accelerators": list(DEFAULTS.headline_accelerators),
        "cost_scales": list(grid.cost_scales), "variants": {k: list(v) for k, v in
                                                             VARIANTS.items()},
        "defaults": _defaults_point(DEFAULTS), "windows": windows,
        "paper_gains": PAPER_GAINS,
    }
    study |= _streams_and_scales(grid, windows, tick)
    study["holds"] = _holds(study["by_cost_scale"])  # type: ignore[arg-type]
    study["heatmap"] = _heatmap(grid, windows, tick)
    study["reestimation"] = _reestimation(grid, windows, ctx.seed, tick)
    return {"sweep": study, "seed": ctx.seed, "quick": ctx.quick,
            "trace_source": default_trace_source()}


def _holds(by_scale: dict[str, dict[str, dict[str, dict[str, float]]]],
           ) -> dict[str, dict[str, dict[str, bool]]]:
    """variant → accelerators → cost scale → whether the maximum over stream counts of the
    relative gain reaches the paper's figure there."""
    return {variant: {g: {scale: bool(rows[g]["max_relative"] >= PAPER_GAINS[g] - 1e-12)
                          for scale, rows in scales.items()}
                      for g in PAPER_GAINS}
            for variant, scales in by_scale.items()}


def _defaults_point(d: BenchDefaults) -> dict[str, float]:
    """Where the plain bench sits in the sweep's coordinates."""
    return {"cost_scale": d.trace_cost_scale, "streams": d.stressed_streams,
            "share_per_stream_1_accelerator": 1.0 / d.stressed_streams}
