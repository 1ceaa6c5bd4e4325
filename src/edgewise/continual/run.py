"""Carry Ekya plans out for real: per stream an inference and a retraining actor sharing one
emulated device by the scheduler's shares; accuracy measured against the true labels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from edgewise.cluster.model import Cluster, Device, Link
from edgewise.continual.calibration import (
    calibrate_stretch,
    offline_inference_options,
    profile_inference,
    stream_inference_options,
)
from edgewise.continual.microprofiler import (
    MicroProfile,
    MicroProfilerSettings,
    ProfileHistory,
    WindowData,
    microprofile,
    prepare_window,
)
from edgewise.continual.policies import Policy, get_policy
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceOption,
    StreamState,
)
from edgewise.continual.window import (
    RunSettings,
    StreamRun,
    WindowResult,
    execute_window,
    retrain_config_dict,
)
from edgewise.continual.workload import edge_models
from edgewise.errors import ConfigError
from edgewise.nn.continual_models import model_from_frame, model_to_frame
from edgewise.nn.streams import DigitsStream, Stream, Window
from edgewise.nn.workload import Workload
from edgewise.runtime.colocated import InferenceActor, RetrainActor, mps_env
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = [
    "DEVICE",
    "LiveProblem",
    "RunSettings",
    "StreamRun",
    "WindowResult",
    "edge_cluster",
    "execute",
    "offline_inference_options",
    "plan_window",
    "profile_inference",
]  # fmt: skip

DEVICE = "edge-gpu"
ACTOR_MEMORY_MB = 64


def edge_cluster() -> Cluster:
    """One emulated edge server whose compute the streams' jobs share."""
    device = Device(DEVICE, "edge-server", 2, "gpu", 4096, 1.0)
    return Cluster("ekya-edge", (device,), Link(DEVICE, DEVICE, 1000.0, 0.1))


def plan_window(policy: str | Policy, states: Sequence[StreamState], settings: RunSettings,
                accelerators: float = 1.0) -> ContinualPlan:
    """Algorithm 1 (or a baseline) over the micro-profiled estimates of this window."""
    problem = ContinualProblem(tuple(states), accelerators, settings.window_s, settings.delta,
                               settings.a_min)
    chosen = get_policy(policy) if isinstance(policy, str) else policy
    return chosen(problem, np.random.default_rng(settings.seed))


def _launch(runtime: RayRuntime, stream: Stream, weights: bytes,
            settings: RunSettings, device: str = DEVICE) -> StreamRun:
    import ray

    from edgewise.runtime.vessel_pool import spawn_member

    opts = runtime.member_options(device, ACTOR_MEMORY_MB)
    env = mps_env(0.5)
    if env:
        opts["runtime_env"] = {"env_vars": env}
    infer = spawn_member(ray.remote(InferenceActor), {**opts, "max_concurrency": 2},
                         weights, settings.stretch)
    trainer = spawn_member(ray.remote(RetrainActor), {**opts, "max_concurrency": 2},
                           settings.stretch)
    return StreamRun(stream, weights, infer, trainer)


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


def _actor_costs(runs: Sequence[StreamRun], data: dict[str, WindowData],
                 profiles: dict[str, MicroProfile], settings: RunSettings,
                 scale: float) -> dict[str, MicroProfile]:
    """Each profiled configuration's per-epoch cost measured where it is paid (§4.3: "the
    compute time per epoch ... at full allocation"): by the stream's retraining actor, under
    the device's time-slicing, on the micro-profiler's sample size, scaled linearly to the
    configuration's data; ``scale`` is the correction learnt from past windows (§5)."""
    import ray

    refs = {}
    for r in runs:
        d, p = data[r.stream.name], profiles[r.stream.name]
        n_sub = min(len(d.train_y), max(settings.micro.min_subset,
                                        round(settings.micro.subset_fraction * len(d.train_y))))
        idx = np.random.default_rng([settings.seed, 31]).permutation(len(d.train_y))[:n_sub]
        configs = [retrain_config_dict(settings.retrain_configs, c.config.name, 0)
                   for c in p.configs]
        refs[r.stream.name] = r.trainer.epoch_cost.remote(r.weights, d.train_x[idx],
                                                          d.train_y[idx], configs, 1.0)
    out = {}
    for name, ref in refs.items():
        per_sample, p, n = ray.get(ref), profiles[name], len(data[name].train_y)
        priced = tuple(replace(c, epoch_s=cost * max(1, round(c.config.data_fraction * n)) * scale)
                       for c, cost in zip(p.configs, per_sample, strict=True))
        out[name] = replace(p, configs=priced)
    return out


def _asdict(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _stream_inference(run: StreamRun, index: int, golden: torch.nn.Module,
                      settings: RunSettings,
                      options: tuple[InferenceOption, ...]) -> tuple[InferenceOption, ...]:
    """λ's factors for this stream: from its previous window's live frames once it has one
    (window 0 has only the hold-out profile)."""
    if index == 0:
        return options
    return stream_inference_options(model_from_frame(run.weights), run.stream.window(index - 1),
                                    golden, settings.inference_configs, options)


def _feedback(result: WindowResult, profiles: dict[str, MicroProfile], scale: float,
              infer_opts: tuple[InferenceOption, ...],
              ) -> tuple[float, tuple[InferenceOption, ...]]:
    """Correct the next window's cost scale and inference demands by what this window
    measured (§5, "adapting estimates"): device-seconds per epoch of the retrainings that ran
    against the profiled estimate, and the frame rate of inference actors that lagged."""
    ratios = []
    for name, measured in result.epoch_cost_s.items():
        config = result.retrained.get(name)
        est = next((p for p in profiles[name].configs if p.config.name == config), None)
        if est is not None and est.epoch_s > 0:
            ratios.append(measured / est.epoch_s)
    if ratios:
        scale *= float(np.median(ratios))
    if result.demand_ratio:
        lag = float(np.median(list(result.demand_ratio.values())))
        infer_opts = tuple(InferenceOption(o.config, o.accuracy_factor, o.demand * lag)
                           for o in infer_opts)
    return scale, infer_opts


@dataclass(frozen=True, slots=True)
class LiveProblem:
    """What a real run answers: ``streams`` (drifting digits or a user's frame folders)
    sharing one emulated device (``device`` of the runtime's cluster) for ``windows``
    windows under ``settings``; ``holdout`` is the stream the inference profiler measures
    once at the start (None: a fresh digits stream of the streams' frame count for digits
    streams, else the first stream). ``student`` and ``golden`` are workload specs of the
    models (None: the built-in digits CNNs)."""

    streams: tuple[Stream, ...]
    windows: int
    settings: RunSettings = field(default_factory=RunSettings)
    holdout: Stream | None = None
    device: str = DEVICE
    student: Workload | None = None
    golden: Workload | None = None

    def __post_init__(self) -> None:
        if not self.streams:
            raise ConfigError("no stream to run", field="streams")
        most = min(s.n_windows for s in self.streams)
        if not 1 <= self.windows <= most:
            raise ConfigError(f"n_windows must be in 1..{most}", field="windows")


def execute(runtime: RayRuntime, problem: LiveProblem, policy: str | Policy, /, *,
            progress: Callable[[WindowResult], None] | None = None) -> list[WindowResult]:
    """Carry ``policy`` out for real on ``problem``: per stream an inference and a retraining
    actor on one device; every window micro-profile, plan with ``policy`` (a registered name
    or a callable), run the jobs at the planned shares and re-plan whenever a retraining
    completes (Algorithm 1). Ekya plans online, on profiles measured during the run, so
    the executor takes the policy that makes each window's plan rather than a plan made in
    advance. On a cluster slower than its devices (``runtime.time_dilation``) the windows
    stretch alike. Returns one measured ``WindowResult`` per window."""
    planner = get_policy(policy) if isinstance(policy, str) else policy  # fails before Ray
    settings = problem.settings
    if not runtime.emulated:  # real devices are as slow as they are: nothing to stretch;
        # a cluster slower than its devices (time dilation) gets windows as much longer
        settings = replace(settings, stretch=1.0,
                           window_s=settings.window_s * runtime.time_dilation)
    models = edge_models(problem.student, problem.golden, settings.seed)
    golden = models.golden
    holdout = problem.holdout or _holdout(problem.streams, settings.seed)
    weights = model_to_frame(models.student)
    runs = [_launch(runtime, s, weights, settings, problem.device) for s in problem.streams]
    try:
        return _windows(runs, planner, problem.windows, settings, golden, holdout, progress)
    finally:
        from edgewise.runtime.vessel_pool import release_members

        release_members([h for r in runs for h in (r.infer, r.trainer)])


def _holdout(streams: tuple[Stream, ...], seed: int) -> Stream:
    """A fresh digits stream of the streams' frame count, or a user's first stream."""
    if all(isinstance(s, DigitsStream) for s in streams):
        return DigitsStream("holdout", 10_000 + seed, n_windows=1,
                            frames_per_window=len(streams[0].window(0).x))
    return streams[0]


def _windows(runs: list[StreamRun], policy: Policy, n_windows: int, settings: RunSettings,
             golden: torch.nn.Module, holdout: Stream,
             progress: Callable[[WindowResult], None] | None) -> list[WindowResult]:
    """Profile the device once, then micro-profile, plan and execute window after window."""
    import ray

    ray.get([r.trainer.spin.remote(0.05, 1.0) for r in runs])  # actors up before window 0
    infer_opts = profile_inference(runs, holdout.window(0), golden, settings)
    stretch, scale = calibrate_stretch(runs), 1.0  # stretch: the profiler's own CPU cost
    history = ProfileHistory()
    results = []
    for index in range(n_windows):
        windows, data, profiles = _profiles(runs, index, golden, settings, history, stretch)
        profiles = _actor_costs(runs, data, profiles, settings, scale)
        states = [StreamState(r.stream.name, profiles[r.stream.name].model_accuracy,
                              profiles[r.stream.name].options(),
                              _stream_inference(r, index, golden, settings, infer_opts))
                  for r in runs]
        plan = plan_window(policy, states, settings)
        planner = None if not settings.replan else (
            lambda problem: policy(problem, np.random.default_rng(settings.seed)))
        result = execute_window(runs, plan, states, windows, data, settings, index, golden,
                                planner)
        scale, infer_opts = _feedback(result, profiles, scale, infer_opts)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
