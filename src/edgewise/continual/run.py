"""Carry Ekya plans out for real: per stream an inference and a retraining actor sharing one
emulated device by the scheduler's shares; accuracy measured against the true labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from edgewise.cluster.model import Cluster, Device, Link
from edgewise.continual.calibration import (
    calibrate_stretch,
    offline_inference_options,
    profile_inference,
)
from edgewise.continual.microprofiler import (
    MicroProfile,
    MicroProfilerSettings,
    ProfileHistory,
    WindowData,
    microprofile,
    prepare_window,
)
from edgewise.continual.policies import get_policy
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceConfig,
    InferenceOption,
    RetrainConfig,
    StreamDecision,
    StreamState,
    default_inference_configs,
    default_retrain_configs,
)
from edgewise.errors import ConfigError
from edgewise.nn.continual_models import (
    golden_model,
    model_from_frame,
    model_to_frame,
    pretrained_edge,
)
from edgewise.nn.streams import DigitsStream, Window
from edgewise.runtime.colocated import InferenceActor, RetrainActor, mps_env
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = [
    "DEVICE",
    "RunSettings",
    "StreamRun",
    "WindowResult",
    "edge_cluster",
    "offline_inference_options",
    "plan_window",
    "profile_inference",
    "run_continual",
]  # fmt: skip

DEVICE = "edge-gpu"
MIN_SHARE = 0.02
ACTOR_MEMORY_MB = 64


def edge_cluster() -> Cluster:
    """One emulated edge server whose compute the streams' jobs share."""
    device = Device(DEVICE, "edge-server", 2, "gpu", 4096, 1.0)
    return Cluster("ekya-edge", (device,), Link(DEVICE, DEVICE, 1000.0, 0.1))


@dataclass(frozen=True, slots=True)
class RunSettings:
    """A real run: ``window_s`` wall seconds per window; ``stretch`` accelerator seconds per
    host CPU second (the emulated device's slowness); Algorithm 1's Δ and a_MIN."""

    window_s: float = 6.0
    stretch: float = 15.0
    delta: float = 0.1
    a_min: float = 0.0
    seed: int = 0
    retrain_configs: tuple[RetrainConfig, ...] = field(default_factory=default_retrain_configs)
    inference_configs: tuple[InferenceConfig, ...] = field(
        default_factory=default_inference_configs)
    micro: MicroProfilerSettings = field(default_factory=MicroProfilerSettings)


@dataclass(frozen=True, slots=True)
class WindowResult:
    """One window: the plan, each stream's measured window-averaged accuracy, the epochs each
    retraining finished, and the estimate the policy made."""

    index: int
    plan: ContinualPlan
    accuracy: dict[str, float]
    epochs_done: dict[str, int]
    epoch_cost_s: dict[str, float] = field(default_factory=dict)  # measured, whole device
    demand_ratio: dict[str, float] = field(default_factory=dict)  # measured / profiled

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean(list(self.accuracy.values())))


def plan_window(policy: str, states: Sequence[StreamState], settings: RunSettings,
                accelerators: float = 1.0) -> ContinualPlan:
    """Algorithm 1 (or a baseline) over the micro-profiled estimates of this window."""
    problem = ContinualProblem(tuple(states), accelerators, settings.window_s, settings.delta,
                               settings.a_min)
    return get_policy(policy)(problem, np.random.default_rng(settings.seed))


@dataclass(slots=True)
class StreamRun:
    """A stream's actors and deployed weights across windows."""

    stream: DigitsStream
    weights: bytes
    infer: Any
    trainer: Any


def _launch(runtime: RayRuntime, stream: DigitsStream, weights: bytes,
            settings: RunSettings) -> StreamRun:
    import ray

    opts = runtime.actor_options(DEVICE, ACTOR_MEMORY_MB)
    env = mps_env(0.5)
    if env:
        opts["runtime_env"] = {"env_vars": env}
    infer = ray.remote(InferenceActor).options(**opts, max_concurrency=2).remote(
        weights, settings.stretch)
    trainer = ray.remote(RetrainActor).options(**opts).remote(settings.stretch)
    return StreamRun(stream, weights, infer, trainer)


def _config_dict(configs: Sequence[RetrainConfig], name: str, seed: int) -> dict[str, Any]:
    config = next((c for c in configs if c.name == name), None)
    if config is None:
        raise ConfigError(f"plan names unknown retraining config {name!r}", field="retrain")
    return {"epochs": config.epochs, "batch_size": config.batch_size,
            "last_layer_neurons": config.last_layer_neurons,
            "layers_frozen": config.layers_frozen, "seed": seed, "version_base": 1000 * seed,
            "data_fraction": config.data_fraction}


def _profiles(runs: Sequence[StreamRun], index: int, golden: torch.nn.Module,
              settings: RunSettings, history: ProfileHistory, stretch: float,
              ) -> tuple[dict[str, Window], dict[str, Any], dict[str, MicroProfile]]:
    windows, data, profiles = {}, {}, {}
    for r in runs:
        w = r.stream.window(index)
        windows[r.stream.name] = w
        data[r.stream.name] = prepare_window(w, golden, seed=settings.seed)
        micro = MicroProfilerSettings(**{**_asdict(settings.micro), "stretch": stretch})
        profiles[r.stream.name] = microprofile(
            model_from_frame(r.weights), data[r.stream.name], settings.retrain_configs,
            settings=micro, history=history, stream=r.stream.name, seed=settings.seed + index)
    return windows, data, profiles


def _asdict(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _fraction(data: WindowData, fraction: float,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The configuration's fraction of the window's labelled frames, as micro-profiled."""
    n = max(1, round(fraction * len(data.train_y)))
    idx = np.random.default_rng([seed, 29]).permutation(len(data.train_y))[:n]
    return data.train_x[idx], data.train_y[idx]


def _inference_share(d: StreamDecision) -> float:
    """I, plus R when the stream does not retrain: time-slicing is work-conserving, so a
    share granted to no job is used by the stream's inference."""
    share = d.inference_share + (d.retrain_share if d.retrain is None else 0.0)
    return max(MIN_SHARE, min(1.0, share))


def _execute(runs: Sequence[StreamRun], plan: ContinualPlan, windows: dict[str, Window],
             data: dict[str, Any], settings: RunSettings, index: int,
             inference_rates: dict[str, float],
             infer_opts: tuple[InferenceOption, ...]) -> WindowResult:
    """Start every stream's inference and retraining at once; wait for the window's end."""
    import ray

    jobs, trainings = {}, {}
    for r in runs:
        d, w = plan.decision(r.stream.name), windows[r.stream.name]
        share = _inference_share(d)
        jobs[r.stream.name] = r.infer.run_window.remote(
            w.x, settings.window_s, inference_rates[d.inference], share)
        if d.retrain is not None and d.retrain_share > 1e-9:
            config = _config_dict(settings.retrain_configs, d.retrain, index + 1)
            x, y = _fraction(data[r.stream.name], config["data_fraction"], settings.seed + index)
            trainings[r.stream.name] = r.trainer.retrain.remote(
                r.weights, x, y, config,
                min(1.0, d.retrain_share), settings.window_s, r.infer)
    accuracy, epochs, epoch_cost, rates = {}, {}, {}, {}
    for r in runs:
        d, name = plan.decision(r.stream.name), r.stream.name
        served = ray.get(jobs[name])
        w = windows[name]
        accuracy[name] = float((np.asarray(served["labels"]) == w.y).mean())
        candidates = len(w.x) * inference_rates[d.inference]
        if served["analysed"] < 0.9 * candidates:  # it lagged: measure the device's rate
            share = _inference_share(d)
            measured = served["analysed"] / settings.window_s / share
            lam = next(o for o in infer_opts if o.config == d.inference)
            profiled = candidates / settings.window_s / lam.demand
            rates[name] = profiled / max(measured, 1e-6)
        epochs[name] = 0
        if name in trainings:
            done = ray.get(trainings[name])
            epochs[name] = int(done["epochs"])
            if done["epochs"] > 0:
                epoch_cost[name] = done["seconds"] * min(1.0, d.retrain_share) / done["epochs"]
                r.weights = done["frame"]
                ray.get(r.infer.load_weights.remote(r.weights, 1000 * (index + 2) - 1))
    return WindowResult(index, plan, accuracy, epochs, epoch_cost, rates)


def _feedback(result: WindowResult, profiles: dict[str, MicroProfile], stretch: float,
              infer_opts: tuple[InferenceOption, ...],
              ) -> tuple[float, tuple[InferenceOption, ...]]:
    """Correct the next window's cost scale and inference demands by what this window
    measured (§5, "adapting estimates"): retraining seconds per epoch at the granted share
    against the micro-profiled estimate, and the frame rate of inference actors that lagged."""
    ratios = []
    for name, measured in result.epoch_cost_s.items():
        d = result.plan.decision(name)
        est = next((p for p in profiles[name].configs if p.config.name == d.retrain), None)
        if est is not None and est.epoch_s > 0:
            ratios.append(measured / est.epoch_s)
    if ratios:
        stretch *= float(np.median(ratios))
    if result.demand_ratio:
        scale = float(np.median(list(result.demand_ratio.values())))
        infer_opts = tuple(InferenceOption(o.config, o.accuracy_factor, o.demand * scale)
                           for o in infer_opts)
    return stretch, infer_opts


def run_continual(runtime: RayRuntime, streams: Sequence[DigitsStream], policy: str,
                  n_windows: int, settings: RunSettings | None = None,
                  progress: Callable[[WindowResult], None] | None = None,
                  holdout: DigitsStream | None = None) -> list[WindowResult]:
    """Run ``policy`` for real over ``n_windows`` windows of ``streams`` on one device:
    micro-profile, plan, then run inference and retraining actors at the planned shares."""
    settings = settings or RunSettings()
    if not streams:
        raise ConfigError("no stream to run", field="streams")
    if not 1 <= n_windows <= min(s.n_windows for s in streams):
        raise ConfigError(f"n_windows must be in 1..{min(s.n_windows for s in streams)}",
                          field="windows")
    get_policy(policy)  # unknown names fail before any actor starts
    golden = golden_model(settings.seed)
    start_model = pretrained_edge(settings.seed)
    holdout = holdout or DigitsStream("holdout", 10_000 + settings.seed, n_windows=1,
                                      frames_per_window=len(streams[0].window(0).x))
    weights = model_to_frame(start_model)
    runs = [_launch(runtime, s, weights, settings) for s in streams]
    try:
        return _windows(runs, policy, n_windows, settings, golden, holdout, progress)
    finally:
        import ray

        for r in runs:
            ray.kill(r.infer)
            ray.kill(r.trainer)


def _windows(runs: list[StreamRun], policy: str, n_windows: int, settings: RunSettings,
             golden: torch.nn.Module, holdout: DigitsStream,
             progress: Callable[[WindowResult], None] | None) -> list[WindowResult]:
    """Profile the device once, then micro-profile, plan and execute window after window."""
    import ray

    rates = {lam.name: lam.sampling_rate for lam in settings.inference_configs}
    ray.get([r.trainer.spin.remote(0.05, 1.0) for r in runs])  # actors up before window 0
    infer_opts = profile_inference(runs, holdout.window(0), golden, settings)
    stretch = calibrate_stretch(runs)
    history = ProfileHistory()
    results = []
    for index in range(n_windows):
        windows, data, profiles = _profiles(runs, index, golden, settings, history, stretch)
        states = [StreamState(name, p.model_accuracy, p.options(), infer_opts)
                  for name, p in profiles.items()]
        plan = plan_window(policy, states, settings)
        result = _execute(runs, plan, windows, data, settings, index, rates, infer_opts)
        stretch, infer_opts = _feedback(result, profiles, stretch, infer_opts)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
