"""Deep-Edge on a testbed, end to end: profile one device of each worker type where it is
(stressors and SIFT in the device's own CPU quota and memory, updates through a real
parameter server), fit the paper's functions to those profiles, plan an update with
deep-edge and with fair from the learned models, run both on the same testbed with every
background app running, and compare predicted with measured epoch times and deadline
misses (all in device time: measured ÷ the testbed's time dilation)."""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import ray

from edgewise.bench import Figures
from edgewise.cluster.model import Role
from edgewise.errors import InfeasibleError
from edgewise.perf.learned import LearnedDevice
from edgewise.perf.profiler import ProfileConfig
from edgewise.perf.stress import StressPoint
from edgewise.runtime.devprofile import DeviceProbe, device_grid, device_state, profile_device
from edgewise.runtime.plan import TrainConfig
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.update.problem import UpdateProblem
from edgewise.update.protocol import REPEATABLE_TRIALS, pressure_margins, with_models
from edgewise.update.run import UpdateRun, cluster_problem, execute
from edgewise.update.sim import PlanScore, UpdateOutcome, simulate

__all__ = ["SCENARIO", "SPAN_APP_PERIODS", "epochs_for", "fit_testbed_models",
           "prediction_errors", "profile_testbed", "update_figures"]

Progress = Callable[[str, float], None]
N_SAMPLES = 1437  # the digits training split
POLICIES = ("deep-edge", "fair")
# The run's background load, as in the paper's experiments (random stressors that leave
# SIFT within its deadline on an idle device): one Nano busy, one short of memory.
SCENARIO: Mapping[str, StressPoint] = {"nano-1": StressPoint(50, 0, 0),
                                       "nano-2": StressPoint(20, 1024, 0)}


def profile_config(device_type: str, memory_mb: int, quick: bool, seed: int) -> ProfileConfig:
    """The grid a testbed device is profiled on: 4 CPU levels × 3 memory levels × 4 batch
    sizes (48 samples, above the fit's 40-row minimum), shorter samples when ``quick``."""
    return ProfileConfig(tuple(device_grid(memory_mb)), batch_sizes=(16, 32, 64, 128),
                         step_s=1.0 if quick else 1.5, settle_s=0.5 if quick else 1.0,
                         device_type=device_type, seed=seed,
                         wire_dtype="float32")  # the bench's update trains async at float32


def profile_testbed(runtime: RayRuntime, folder: Path, quick: bool, seed: int,
                    progress: Progress) -> dict[str, pd.DataFrame]:
    """One profile per worker device type, measured on the first worker of that type."""
    cluster = runtime.cluster
    chosen: dict[str, str] = {}
    for d in cluster.with_role(Role.WORKER):
        chosen.setdefault(d.type, d.name)
    profiles = {}
    for k, (dtype, device) in enumerate(chosen.items()):
        config = profile_config(dtype, cluster.device(device).memory_mb, quick, seed)
        path = folder / f"{dtype}.csv"

        def tick(done: int, total: int, key: str, k: int = k, device: str = device) -> None:
            progress(f"profiling {device}: {key}", (k + done / max(total, 1)) / len(chosen))

        profile_device(runtime, device, path, config, progress=tick)
        profiles[dtype] = pd.read_csv(path)
    return profiles


def fit_testbed_models(profiles: Mapping[str, pd.DataFrame], seed: int
                       ) -> dict[str, LearnedDevice]:
    """The paper's functions fitted by AutoML to each profile (trial-bounded: repeatable)."""
    from edgewise.perf.fitting import fit_models  # FLAML: imported on use

    return {t: fit_models(p, t, time_budget_s=None, max_trials=REPEATABLE_TRIALS, seed=seed)
            for t, p in profiles.items()}


def _states(runtime: RayRuntime) -> dict[str, tuple[float, float, float]]:
    """Each worker's state with its SIFT app running (as the profile measured states)."""
    out = {}
    for d in runtime.cluster.with_role(Role.WORKER):
        apps = runtime.cluster.apps_on(d.name)
        period = (apps[0].period_ms if apps else 200.0) * runtime.time_dilation
        out[d.name] = device_state(runtime, d.name, apps[0].kind if apps else "", period,
                                   interval_s=2 * period / 1000)  # as the profiler does
    return out


def _app_period_s(runtime: RayRuntime) -> float:
    """The longest period of the workers' co-located apps, device seconds (0.2 without)."""
    periods = [a.period_ms for d in runtime.cluster.with_role(Role.WORKER)
               for a in runtime.cluster.apps_on(d.name)]
    return max(periods, default=200.0) / 1000


def _plans(runtime: RayRuntime, learned: Mapping[str, LearnedDevice],
           profiles: Mapping[str, pd.DataFrame], seed: int
           ) -> tuple[UpdateProblem, dict[str, UpdateOutcome], dict[str, float]]:
    """The problem of the testbed's measured states with the learned models, deep-edge's
    and fair's plans, and the pressure margins they were made with: the held-out error of
    the learned pressure (as ``edgewise bench deep-edge``), or none where with them no
    worker could take the update."""
    servers = runtime.cluster.with_role(Role.PARAMETER_SERVER)
    ps_state = device_state(runtime, servers[0].name) if servers else (10.0, 0.0, 30.0)
    base = cluster_problem(runtime.cluster, _states(runtime), N_SAMPLES, ps_state)
    margins = pressure_margins(learned, profiles, seed)
    for chosen in (margins, {}):
        problem = with_models(base, learned, chosen)
        try:
            return problem, {p: simulate(problem, p, seed=seed) for p in POLICIES}, chosen
        except InfeasibleError:
            continue
    raise InfeasibleError("deep-edge finds no plan on the testbed even at δ = the deadline")


SPAN_APP_PERIODS = 10
"""How many of the co-located app's periods the run's steady epochs span together, at least.
An epoch of the digits plan lasts a fifth of a SIFT period (0.04 device s against 0.2), so
one epoch falls wholly inside or outside an app execution, and single epochs of one run
scatter by a factor of 2-3 (2026-12-06, docs/testbed.md). The profile's times are means over
1.5 s windows, so the prediction is of the mean epoch over many periods: the paper's
epochs (Inception on Caltech-256, steps of 2-3 s) span hundreds."""


def epochs_for(predicted_epoch_s: float, app_period_s: float, quick: bool) -> int:
    """Epochs to run a plan for: the first (which also ships the shards) and then enough
    for the rest to span ``SPAN_APP_PERIODS`` app periods (a third as many when ``quick``),
    at least 5 (2 when quick), at most 400; device seconds in, epochs out."""
    span_s = SPAN_APP_PERIODS * app_period_s / (3 if quick else 1)
    steady = math.ceil(span_s / max(predicted_epoch_s, 1e-6))
    return 1 + min(399, max(2 if quick else 5, steady))


def prediction_errors(predicted_s: float, measured_s: Sequence[float]) -> tuple[float, float]:
    """(|mean − predicted| ÷ mean, the median of |m − predicted| ÷ m) over the epochs
    ``measured_s`` after the first (which also ships the shards)."""
    steady = list(measured_s[1:] or measured_s)
    mean = statistics.fmean(steady)
    return (round(abs(mean - predicted_s) / mean, 4),
            round(statistics.median(abs(m - predicted_s) / m for m in steady), 4))


def _worker_figures(run: UpdateRun, score: PlanScore, dilation: float
                    ) -> dict[str, dict[str, float]]:
    """Each worker's predicted and measured (median of the epochs after the first, device
    time) compute per sample, update per batch and epoch: which term errs."""
    epochs = run.result.epochs[1:] or run.result.epochs
    out = {}
    for device, (t_c, t_u) in score.worker_parts.items():
        stats = [r.worker_stats[device] for r in epochs if device in r.worker_stats]
        if not stats:
            continue
        measured = {k: statistics.median(s[k] for s in stats) / dilation
                    for k in ("compute_seconds_per_sample", "update_seconds_per_batch",
                              "wall_seconds")}
        out[device] = {"predicted_compute_s_per_sample": round(t_c, 6),
                       "measured_compute_s_per_sample":
                           round(measured["compute_seconds_per_sample"], 6),
                       "predicted_update_s": round(t_u, 6),
                       "measured_update_s": round(measured["update_seconds_per_batch"], 6),
                       "predicted_epoch_s": round(score.worker_epoch_s[device], 4),
                       "measured_epoch_s": round(measured["wall_seconds"], 4)}
    return out


def _run_figures(run: UpdateRun, score: PlanScore, dilation: float) -> Figures:
    """Epoch times in device time and their error against the prediction, the apps' misses.
    The prediction (Eq. 5–6) is of the epoch's training: every worker's ⌈d/b⌉ steps of
    compute and update, the slowest worker's loop; the engine's epoch also pulls the
    weights once per worker and ends with the server's checkpoint and the validation pass,
    which the cost model leaves out, so the error is given against both. The error is of
    the mean epoch after the first (see ``SPAN_APP_PERIODS``), the median of single
    epochs' errors beside it."""
    epochs = run.result.epochs
    whole = [r.wall_seconds / dilation for r in epochs]
    training = [max(s["wall_seconds"] for s in r.worker_stats.values()) / dilation
                for r in epochs]
    predicted_s = score.epoch_s
    of_mean, of_epochs = prediction_errors(predicted_s, training)
    return {"predicted_epoch_device_s": round(predicted_s, 4),
            "epochs": len(epochs),
            "measured_training_device_s": [round(m, 4) for m in training],
            "measured_epoch_device_s": [round(m, 4) for m in whole],
            "measured_epoch_s": [round(r.wall_seconds, 3) for r in epochs],
            "epoch_time_prediction_error": of_mean,
            "epoch_time_prediction_error_median_of_epochs": of_epochs,
            "whole_epoch_time_prediction_error": prediction_errors(predicted_s, whole)[0],
            "workers": _worker_figures(run, score, dilation),
            "deadline_misses": int(sum(a["misses"] for a in run.apps)),
            "app_periods": int(sum(a["periods"] for a in run.apps)),
            "apps": {a["app"]: {"misses": a["misses"], "periods": a["periods"],
                                "exec_ms_p95_device": round(a["exec_ms_p95"], 1)}
                     for a in run.apps},
            "val_accuracy": round(run.result.val_accuracy, 4)}


def _hold_stress(runtime: RayRuntime, seconds: float) -> list[Any]:
    probes = []
    for device, point in SCENARIO.items():
        if device in runtime.cluster.device_names:
            probe = DeviceProbe.options(**runtime.actor_options(device, 64)).remote()  # type: ignore[attr-defined]
            ray.get(probe.stress.remote(point, seconds))
            probes.append(probe)
    return probes


def _mape(learned: Mapping[str, LearnedDevice]) -> dict[str, dict[str, float | None]]:
    """Held-out MAPE (%) of every learned function (Deep-Edge Table I), per device type."""
    return {t: {r["function"]: None if r["mape_mean"] is None else round(r["mape_mean"], 1)
                for r in m.mape} for t, m in learned.items()}


def update_figures(runtime: RayRuntime, *, quick: bool, seed: int, progress: Progress,
                   profiles_dir: Path | None = None) -> Figures:
    """Profile, fit, plan and run as the module says; the ``update_*`` figures."""
    with tempfile.TemporaryDirectory(prefix="edgewise-profiles-") as scratch:
        folder = profiles_dir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        profiles = profile_testbed(runtime, folder, quick, seed,
                                   lambda m, f: progress(m, 0.6 * f))
    progress("fitting the learned models", 0.6)
    learned = fit_testbed_models(profiles, seed)
    probes = _hold_stress(runtime, 1800.0)
    try:
        problem, outcomes, margins = _plans(runtime, learned, profiles, seed)
        figures: Figures = {"update_profile_rows": {t: len(p) for t, p in profiles.items()},
                            "update_worker_states": {w.device: [round(x, 1) for x in w.state]
                                                     for w in problem.workers},
                            "update_pressure_margins": {t: round(m, 3)
                                                        for t, m in margins.items()},
                            "update_model_mape": _mape(learned)}
        for k, (policy, outcome) in enumerate(outcomes.items()):
            progress(f"running the {policy} plan", 0.65 + 0.17 * k)
            epochs = epochs_for(outcome.score.epoch_s, _app_period_s(runtime), quick)
            run = execute(runtime, problem, outcome.plan,
                          config=TrainConfig(mode="async", epochs=epochs, seed=seed,
                                             evaluation="after"))  # epochs as predicted
            figures[f"update_{policy.replace('-', '_')}"] = {
                "shards": dict(outcome.plan.shards), "batch_sizes": dict(outcome.plan.batch_sizes),
                "predicted_violations": list(outcome.score.violations),
                **_run_figures(run, outcome.score, runtime.time_dilation)}
    finally:
        for probe in probes:
            ray.get(probe.unstress.remote())
            ray.kill(probe)
    de, fair = figures["update_deep_edge"], figures["update_fair"]
    return {"update_epoch_time_prediction_error": de["epoch_time_prediction_error"],
            "update_whole_epoch_time_prediction_error": de["whole_epoch_time_prediction_error"],
            "update_epoch_time_prediction_error_median_of_epochs":
                de["epoch_time_prediction_error_median_of_epochs"],
            "update_epoch_time_prediction_error_fair": fair["epoch_time_prediction_error"],
            "update_app_deadline_misses_deep_edge": de["deadline_misses"],
            "update_app_deadline_misses_fair": fair["deadline_misses"], **figures}
