"""``edgewise bench time-to-accuracy``: the loops raced to a target accuracy (issue 24).

Protocol (``repeats`` runs, seeds ``s``, ``s+1``, ...; one generated data set): the shipped
MobileNetV2 ×0.35 spec on generated shapes (``per_class`` images per class, 80 % for training),
``epochs`` epochs, Adam at 0.003 with the cosine schedule, target ``target`` validation
accuracy, on the emulated Deep-Edge testbed (time dilation 1) with its SIFT apps running beside
every arm (each arm's misses reported):

- ``deep-edge/async``, ``deep-edge/sync``, ``fair/async``, ``fair/sync``: the policy plans,
  the engine trains the plan with that loop (``async``: its staleness treatment); the plan's
  fastest worker evaluates each epoch;
- ``ray-train-ddp``: Ray Train's TorchTrainer, DDP over gloo, one rank per worker device,
  equal shards, batch 32 per rank; rank 0 evaluates, at its device's speed;
- ``single-device``: a plain PyTorch loop on the fastest worker device alone, batch 32.

Every arm's evaluation is part of its epochs' time, at the speed of the device it runs on.

Each arm's time to accuracy is the device seconds until its first epoch at the target (the
epochs' wall seconds ÷ the time dilation). One run decides little: the engine's runs are not
reproducible for a seed (two one-epoch ``sync`` runs of one worker, no apps, ended with
different weights; the cause is not found, and ordering the pushes of a step did not remove
it), and ``fair/sync`` took 21.2 and 47.0 device seconds to 0.90 in two runs of seed 0. So
every figure is the median over runs of several seeds (MLPerf Training likewise times several
runs and averages them without the fastest and slowest). ``ps_scaling_efficiency_3_workers`` is
the runtime bench's (three emulated Nanos, digits) and ``ps_scaling_link_bound`` the efficiency
the server's link allows for the bytes each sample moves in that run.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.cluster.examples import example_path
from edgewise.suites.tta_arms import ArmResult, TTASetup, edgewise_arm, shapes_setup

__all__ = ["ARMS", "SPEC", "figures_of", "plots", "real"]

ARMS = ("deep-edge/async", "deep-edge/sync", "fair/async", "fair/sync", "ray-train-ddp",
        "single-device")


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 4)


def _median(values: list[float | None]) -> float | None:
    """The median, a None (never reached) counting as longer than any time; None if the
    median itself is one, or there are no values."""
    if not values:
        return None
    found = float(np.median([math.inf if v is None else v for v in values]))
    return None if math.isinf(found) else round(found, 4)


def _best(values: dict[str, float | None], names: list[str]) -> float | None:
    return min((t for n in names if (t := values.get(n)) is not None), default=None)


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
    edgewise = [n for n in ARMS[:4] if n in arms]
    de = [n for n in edgewise if n.startswith("deep-edge")]
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
        "epoch_speedup_deep_edge_over_fair": _ratio(_best(epoch, fair), _best(epoch, de)),
        "deadline_misses": misses,
        "curves": {n: [{"device_seconds": [round(t, 2) for t in r.device_seconds],
                        "val_accuracy": [round(a, 4) for a in r.accuracies]}
                       for r in per_run(n, lambda r: r)] for n in arms},
    }


def _scaling(seed: int, epochs: int) -> Figures:
    """The runtime bench's scaling efficiency and the bound the server's link sets."""
    from edgewise.cluster.model import Role
    from edgewise.cluster.schema import load_cluster
    from edgewise.runtime.bench import runtime_figures
    from edgewise.runtime.ray_cluster import start_local

    cluster = load_cluster(example_path("three-nanos.yaml"))
    runtime = start_local(cluster)
    try:
        found = runtime_figures(runtime, epochs=epochs, solo_epochs=max(2, epochs // 2),
                                seed=seed)
    finally:
        runtime.shutdown()
    server = cluster.with_role(Role.PARAMETER_SERVER)[0].name
    worker = cluster.with_role(Role.WORKER)[0].name
    link_bytes_s = cluster.link(worker, server).bandwidth_mbps * 1e6 / 8
    samples = 1437 * epochs
    bytes_per_sample = found["transport_wire_bytes"] / samples
    link_sps = link_bytes_s / max(bytes_per_sample, 1e-9)
    alone = sum(found["samples_per_second_alone"].values())
    return {"ps_scaling_efficiency_3_workers": found["ps_scaling_efficiency_3_workers"],
            "ps_scaling_link_bound": round(min(1.0, link_sps / alone), 4),
            "ps_scaling_wire_bytes_per_sample": round(bytes_per_sample, 1)}


def _arms(setups: list[TTASetup], ctx: BenchContext,
          only: set[str]) -> list[dict[str, ArmResult]]:
    """Every arm in ``only`` once per setup (one seed each), on one emulated testbed."""
    from edgewise.cluster.model import Role
    from edgewise.cluster.schema import load_cluster
    from edgewise.runtime.ray_cluster import start_local
    from edgewise.suites.tta_ddp import ray_train_ddp_arm, single_device_arm

    cluster = load_cluster(example_path("deep-edge-testbed.yaml"))
    runtime = start_local(cluster)
    names = [a for a in ARMS if a in only]
    runs: list[dict[str, ArmResult]] = []
    try:
        for r, setup in enumerate(setups):
            results: dict[str, ArmResult] = {}
            for i, arm in enumerate(names):
                label = arm if len(setups) == 1 else f"{arm}, seed {setup.seed}"
                ctx.progress(label, (r * len(names) + i) / (len(setups) * len(names)))
                if arm == "ray-train-ddp":
                    workers = [d.name for d in cluster.with_role(Role.WORKER)]
                    results[arm] = ray_train_ddp_arm(runtime, setup, workers)
                elif arm == "single-device":
                    fastest = min(cluster.with_role(Role.WORKER),
                                  key=lambda d: runtime.stretch[d.name])
                    results[arm] = single_device_arm(runtime, setup, fastest.name)
                else:
                    policy, mode = arm.split("/")
                    results[arm] = edgewise_arm(runtime, setup, policy, mode)
            runs.append(results)
    finally:
        runtime.shutdown()
    return runs


def real(ctx: BenchContext) -> Figures:
    """The protocol above; wall-clock figures go to ``ctx.timings``."""
    per_class = 40 if ctx.quick else int(ctx.option("per_class"))
    epochs = 2 if ctx.quick else int(ctx.option("epochs"))
    target = float(ctx.option("target"))
    arms = str(ctx.option("arms") or ",".join(ARMS)).split(",")
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        from edgewise.errors import ConfigError

        raise ConfigError(f"unknown arms {', '.join(unknown)}; use {', '.join(ARMS)}",
                          field="--arms")
    repeats = 1 if ctx.quick else int(ctx.option("repeats"))
    with tempfile.TemporaryDirectory(prefix="edgewise-tta-") as tmp:
        spec = shapes_setup(Path(tmp), per_class, ctx.seed)  # one data set, seeds per run
        setups = [TTASetup(spec, epochs, ctx.seed + r, target) for r in range(repeats)]
        with ctx.timings.timed("arms_seconds"):
            runs = _arms(setups, ctx, set(arms))
    figures: dict[str, Any] = figures_of(runs, target)
    if not ctx.option("skip_scaling"):
        ctx.progress("parameter-server scaling (runtime bench)", 0.95)
        with ctx.timings.timed("scaling_seconds"):
            figures |= _scaling(ctx.seed, 2 if ctx.quick else 8)
    for key in ("tta_device_seconds", "tta_device_seconds_runs"):
        ctx.timings[key] = figures.pop(key)
    return {**figures, "cluster": "deep-edge-testbed (emulated)", "time_dilation": 1.0,
            "epochs": epochs, "per_class": per_class, "target": target, "arms": arms,
            "seeds": [s.seed for s in setups]}


def plots(figures: Figures, folder: Path) -> Figures:
    """Accuracy against device time, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, curves) in enumerate(figures.get("curves", {}).items()):
        for k, curve in enumerate(curves):  # one line per run, one colour per arm
            ax.plot(curve["device_seconds"], curve["val_accuracy"], marker="o", markersize=3,
                    color=f"C{i}", alpha=1.0 if k == 0 else 0.45,
                    label=name if k == 0 else None)
    if figures.get("target") is not None:
        ax.axhline(figures["target"], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("device seconds")
    ax.set_ylabel("validation accuracy")
    ax.legend()
    target = folder / "time-to-accuracy.png"
    fig.savefig(target, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return {"accuracy_over_device_time": str(target)}


SPEC = BenchSpec(
    name="time-to-accuracy",
    title="Time to accuracy: edgewise's loops under the deep-edge and fair plans against Ray "
          "Train's DDP and one device alone, MobileNetV2 on generated shapes.",
    simulated=None,
    real="edgewise.suites.time_to_accuracy:real",
    plots="edgewise.suites.time_to_accuracy:plots",
    real_share=1.0,
    options=(BenchOption("per_class", 300, "generated images per class (4 classes)",
                         minimum=10, maximum=2000),
             BenchOption("epochs", 30, "epochs of every arm", minimum=1, maximum=200),
             BenchOption("target", 0.9, "the target validation accuracy", kind="float",
                         minimum=0.0, maximum=1.0),
             BenchOption("repeats", 3, "runs of every arm, seeds seed, seed+1, ...; the "
                         "figures are medians over them (--quick: 1)", minimum=1, maximum=10),
             BenchOption("arms", None, "comma-separated arms to run (default: all six)",
                         kind="str"),
             BenchOption("skip_scaling", False, "leave out the parameter-server scaling "
                         "runs", kind="bool")),
    labels={"tta_device_seconds": "emulated devices on one host (time dilation 1)",
            "ps_scaling_efficiency_3_workers": "ratio of two wall-clock throughputs in the "
                                               "same run (three emulated Nanos, digits)"},
)
"""``edgewise bench time-to-accuracy``."""
