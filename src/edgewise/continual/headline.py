"""The Ekya bench's headline numbers from its sweeps: §6.2's gain (at the stressed point and
as the paper reads it, a maximum over stream counts; relative and in points), Figure 7's
saving and Table 3's capacities; and the labels that say how to read them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from edgewise.bench import Figures
from edgewise.continual.defaults import BenchDefaults

__all__ = ["LABELS", "accelerators_name", "gain_figures", "saving_and_capacity"]

Sweep = Mapping[str, Mapping[str, Sequence[float]]]  # accelerators → policy → by stream count


def accelerators_name(g: str) -> str:
    """``"1"`` → ``"1_accelerator"``, ``"2"`` → ``"2_accelerators"`` (for key names)."""
    return f"{g}_accelerator" if g == "1" else f"{g}_accelerators"


def _best_uniform(by_pol: Mapping[str, Sequence[float]], uniform: Sequence[str],
                  k: int) -> float:
    return max(by_pol[u][k] for u in uniform)


def gain_figures(sweep: Sweep, counts: Sequence[int], uniform: Sequence[str]) -> Figures:
    """Thief over the best uniform at every point of Figure 6's sweep: relative
    ((thief − best) / best) and in accuracy points (thief − best); the stressed point (the
    last stream count) under its own names, and the maximum over stream counts, §6.2's
    "upto 29% under 1 GPU and 23% under 2 GPU" (with the stream count reaching it)."""
    relative: dict[str, list[float]] = {}
    points: dict[str, list[float]] = {}
    for g, by_pol in sweep.items():
        best = [_best_uniform(by_pol, uniform, k) for k in range(len(counts))]
        relative[g] = [(t - b) / b for t, b in zip(by_pol["thief"], best, strict=True)]
        points[g] = [t - b for t, b in zip(by_pol["thief"], best, strict=True)]
    out: Figures = {"accuracy_gain_by_accelerators": {g: v[-1] for g, v in relative.items()},
                    "accuracy_gain_by_streams": relative,
                    "accuracy_gain_vs_best_uniform": relative["1"][-1],
                    "accuracy_gain_by_streams_points": points}
    where: dict[str, dict[str, int]] = {}
    for g in relative:
        name = accelerators_name(g)
        out[f"accuracy_gain_{counts[-1]}_streams_{name}"] = relative[g][-1]
        out[f"accuracy_gain_{counts[-1]}_streams_{name}_points"] = points[g][-1]
        out[f"accuracy_gain_max_over_streams_{name}"] = max(relative[g])
        out[f"accuracy_gain_max_over_streams_{name}_points"] = max(points[g])
        where[g] = {"relative": counts[relative[g].index(max(relative[g]))],
                    "points": counts[points[g].index(max(points[g]))]}
    out["accuracy_gain_max_over_streams_at"] = where
    return out


def _needed(curve: Mapping[float, float], target: float) -> float | None:
    """The fewest accelerators on the swept grid whose accuracy reaches ``target``."""
    return next((g for g, a in sorted(curve.items()) if a >= target - 1e-9), None)


def _capacity(by_n: Sequence[float], counts: Sequence[int], target: float) -> int:
    """Table 3: the most streams whose mean accuracy meets ``target`` (0 if none)."""
    return max((n for n, a in zip(counts, by_n, strict=True) if a >= target), default=0)


def saving_and_capacity(sweep: Sweep, gpu: Mapping[str, Mapping[float, float]],
                        counts: Sequence[int], uniform: Sequence[str],
                        d: BenchDefaults) -> Figures:
    """Figure 7's saving (the fewest accelerators at which a uniform reaches the thief's
    accuracy, over the thief's) at every reference, and Table 3's capacities."""
    out: Figures = {}
    thief_curve = gpu["thief"]
    savings, bounds = {}, {}
    for ref, target in thief_curve.items():
        reached = [n for n in (_needed(gpu[u], target) for u in uniform) if n is not None]
        savings[f"{ref:g}"] = (min(reached) if reached else max(thief_curve)) / ref
        bounds[f"{ref:g}"] = not reached  # no uniform reached it: the saving is at least this
    ref_key = f"{d.saving_reference_accelerators:g}"
    ref_key = ref_key if ref_key in savings else next(iter(savings))
    out["gpu_saving_by_reference"] = savings
    out["gpu_saving_lower_bound_by_reference"] = bounds
    out["gpu_saving_reference_accelerators"] = float(ref_key)
    out["gpu_saving_factor"] = savings[ref_key]
    out["gpu_saving_is_lower_bound"] = bounds[ref_key]
    names = ["thief", *uniform]
    out["capacity"] = {name: {g: _capacity(v[name], counts, d.capacity_target)
                              for g, v in sweep.items()} for name in names}
    out["capacity_target"] = d.capacity_target
    out["capacity_at_0.6"] = {name: {g: _capacity(v[name], counts, 0.6)
                                     for g, v in sweep.items()}
                              for name in names}  # our accuracies run lower
    return out


_SIM = "trace-driven simulation on the recorded digits trace"
LABELS: dict[str, str] = {
    "accuracy_gain_vs_best_uniform":
        "relative gain at the stressed point only (10 streams, 1 accelerator; issue 6's "
        "definition, alias accuracy_gain_10_streams_1_accelerator), not the paper's 'upto "
        "29%' maximum over stream counts (accuracy_gain_max_over_streams_1_accelerator); "
        + _SIM,
    "accuracy_gain_max_over_streams_1_accelerator":
        "§6.2's reading: the largest relative gain over the stream counts swept "
        "(stream_counts) on 1 accelerator; " + _SIM,
    "accuracy_gain_max_over_streams_2_accelerators":
        "§6.2's reading on 2 accelerators (paper: 23%); " + _SIM,
    "accuracy_gain_max_over_streams_1_accelerator_points":
        "absolute accuracy points (thief − best uniform), maximum over stream counts; "
        "the paper's 29% may be read this way too",
    "accuracy_gain_max_over_streams_2_accelerators_points":
        "absolute accuracy points, maximum over stream counts, 2 accelerators",
    "checkpoint_gain_by_accelerators":
        "sensitivity, not the protocol: every policy serves checkpoints, the thief plans "
        "with the paper's estimate (an unfinished retraining counts as nothing)",
    "checkpoint_aware_gain_by_accelerators":
        "option (§5): every policy serves checkpoints and the thief plans with the "
        "checkpoint-aware estimate (policy thief-checkpoints)",
    "gpu_saving_factor":
        "on the swept accelerator grid; a lower bound where gpu_saving_is_lower_bound",
    "sweep": "sensitivity study (--sweep): copies of the defaults with one or two constants "
             "changed; trace-driven simulation, the defaults are not moved",
    "capacity_at_0.6": "our threshold (Table 3's is 0.75, capacity)",
    "real_estimated_accuracy_thief":
        "the plan's own estimate (Algorithm 2 line 7), not a measurement",
    "real_estimated_accuracy_uniform":
        "the plan's own estimate (Algorithm 2 line 7), not a measurement",
    "real_finish_over_planned_thief":
        "completion on the emulated device, whose throttle follows the planner's cost "
        "model, over the plan's prediction: measures runtime overhead, not the plan",
    "real_finish_over_planned_uniform":
        "completion on the emulated device over the plan's prediction: measures runtime "
        "overhead, not the plan",
    "microprofiler_cost_ratio":
        "ratio of two CPU-time measurements in the same run (exhaustive ÷ micro-profiling)",
}
"""Keys easy to misread, or that compare the emulator with its own formula."""
