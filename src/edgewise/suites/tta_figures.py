"""The race's arms by name and its figures over repeated runs (``bench
time-to-accuracy``): every figure is the median over the runs of the arm's own, a time to
accuracy never reached counting as longer than any, and the ratios are those of the
medians."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgewise.bench import Figures
from edgewise.suites.tta_arms import ArmResult, first_at

__all__ = ["ARMS", "ENGINE_ARMS", "GOODPUT_ARM", "NOISE_FROM", "figures_of"]

ARMS = ("deep-edge/async", "deep-edge/sync", "fair/async", "fair/sync", "deep-edge-goodput/sync",
        "ray-train-ddp", "single-device")
ENGINE_ARMS = ARMS[:5]
GOODPUT_ARM, NOISE_FROM = "deep-edge-goodput/sync", "fair/sync"
"""The goodput arm plans with the noise scale that ``fair/sync`` measured in the same run
(the mean of its Adam-preconditioned readings), as Pollux measures it while training."""


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 4)


def _median(values: list[float | None]) -> float | None:
    """The median, a None (never reached) counting as longer than any time; None if the
    median itself is one, or there are no values."""
    if not values:
        return None
    found = float(np.median([math.inf if v is None else v for v in values]))
    return None if math.isinf(found) else round(found, 4)


def _parts_median(runs: list[dict[str, float] | None]) -> dict[str, float]:
    """Each part's median over the runs that timed it (``tta_arms.step_parts``)."""
    found = [r for r in runs if r]
    keys = sorted({k for r in found for k in r})
    return {k: round(float(np.median([r[k] for r in found if k in r])), 5) for k in keys}


def _best(values: dict[str, float | None], names: list[str]) -> float | None:
    return min((t for n in names if (t := values.get(n)) is not None), default=None)


def _running_tta(arm: ArmResult, target: float) -> float | None:
    """Device seconds to ``target`` by the arm's readings with its own running BatchNorm
    statistics (``extra["running_statistics"]``, the DDP and one-device arms), or None."""
    readings = (arm.extra or {}).get("running_statistics") or []
    epoch = first_at(readings[: len(arm.device_seconds)], target)
    return None if epoch is None else round(arm.device_seconds[epoch], 2)


def figures_of(runs: list[dict[str, ArmResult]], target: float) -> Figures:
    """The race's keys from the arms' curves, over repeated runs (one seed each): every
    figure is the median over the runs of the arm's own figure (a time to accuracy never
    reached counts as longer than any), and the ratios are those of the medians."""
    arms = [n for n in ARMS if any(n in run for run in runs)]

    def per_run(name: str, of: Any) -> list[Any]:
        return [of(run[name]) for run in runs if name in run]

    tta_runs = {n: per_run(n, lambda r: None if (t := r.tta(target)) is None else round(t, 2))
                for n in arms}
    tta = {n: _median(v) for n, v in tta_runs.items()}
    final = {n: _median(per_run(n, lambda r: r.final_accuracy)) for n in arms}
    epoch = {n: _median(per_run(n, lambda r: r.epoch_device_seconds)) for n in arms}
    edgewise = [n for n in ENGINE_ARMS if n in arms]
    de = [n for n in edgewise if n.startswith("deep-edge/")]
    fair = [n for n in edgewise if n.startswith("fair")]
    best = _best(tta, edgewise)
    da, ds = final.get("deep-edge/async"), final.get("deep-edge/sync")
    stale = [v for v in per_run("deep-edge/async", lambda r: r.staleness_mean) if v is not None] \
        if "deep-edge/async" in arms else []
    misses: dict[str, dict[str, int]] = {}
    for run in runs:
        for n, r in run.items():
            for app, count in (r.deadline_misses or {}).items():
                misses.setdefault(n, {})[app] = misses.get(n, {}).get(app, 0) + count
    return {
        "repeats": len(runs),
        "tta_device_seconds": tta,
        "tta_device_seconds_runs": tta_runs,
        "final_accuracy": final,
        "async_final_accuracy": da,
        "async_minus_sync_final_accuracy": None if da is None or ds is None else round(da - ds, 4),
        "staleness_mean": round(float(np.mean(stale)), 4) if stale else None,
        "tta_ratio_best_to_ray_train_ddp": _ratio(best, tta.get("ray-train-ddp")),
        "tta_ratio_best_to_single_device": _ratio(best, tta.get("single-device")),
        "tta_speedup_deep_edge_over_fair": _ratio(_best(tta, fair), _best(tta, de)),
        "tta_speedup_deep_edge_goodput_over_fair": _ratio(_best(tta, fair),
                                                          tta.get(GOODPUT_ARM)),
        "goodput_noise_scale": _median(per_run(GOODPUT_ARM, lambda r: (r.extra or {}).get(
            "planned_noise_scale"))),
        "goodput_noise_scale_runs": per_run(GOODPUT_ARM, lambda r: (r.extra or {}).get(
            "planned_noise_scale")),
        "batch_sizes_runs": {n: per_run(n, lambda r: (r.extra or {}).get("batch_sizes"))
                             for n in edgewise},
        "epoch_speedup_deep_edge_over_fair": _ratio(_best(epoch, fair), _best(epoch, de)),
        "evaluation_device_seconds": {n: _median(per_run(n, lambda r: (r.extra or {}).get(
            "evaluation_device_seconds"))) for n in edgewise},
        "step_device_seconds": {n: _parts_median(per_run(n, lambda r: (r.extra or {}).get(
            "step_device_seconds"))) for n in edgewise},
        "deadline_misses": misses,
        "tta_device_seconds_running_statistics": {
            n: _median(per_run(n, lambda r: _running_tta(r, target)))
            for n in ("ray-train-ddp", "single-device") if n in arms},
        "curves": {n: [{"device_seconds": [round(t, 2) for t in r.reading_seconds],
                        "val_accuracy": [round(a, 4) for a in r.accuracies]}
                       for r in per_run(n, lambda r: r)] for n in arms},
    }
