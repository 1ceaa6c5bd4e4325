"""One real Ekya window: run the plan's inference and retraining jobs on the shared device,
re-run the scheduler whenever a retraining completes (Algorithm 1), and measure."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from edgewise.continual.estimate import estimate_accuracy, inference_factor
from edgewise.continual.microprofiler import MicroProfilerSettings, WindowData
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceConfig,
    RetrainConfig,
    RetrainOption,
    StreamDecision,
    StreamState,
    default_inference_configs,
    default_retrain_configs,
)
from edgewise.errors import ConfigError
from edgewise.nn.continual_models import predict
from edgewise.nn.streams import Stream, Window

__all__ = ["MIN_SHARE", "RunSettings", "StreamRun", "WindowResult", "execute_window",
           "retrain_config_dict"]

MIN_SHARE = 0.02
Planner = Callable[[ContinualProblem], ContinualPlan]


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
    replan: bool = True  # re-run the policy when a retraining completes (Algorithm 1)


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
    planned_finish_s: dict[str, float] = field(default_factory=dict)  # cost / R, retraining
    finish_s: dict[str, float] = field(default_factory=dict)  # measured; inf: unfinished
    planned_accuracy: dict[str, float] = field(default_factory=dict)  # Algorithm 2 line 7
    golden_accuracy: dict[str, float] = field(default_factory=dict)  # vs golden labels
    replans: int = 0  # times the scheduler re-ran after a retraining completed
    retrained: dict[str, str] = field(default_factory=dict)  # the configuration that ran
    frames: dict[str, int] = field(default_factory=dict)  # the window's frames per stream
    analysed: dict[str, int] = field(default_factory=dict)  # of which inference labelled

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean(list(self.accuracy.values())))


@dataclass(slots=True)
class StreamRun:
    """A stream's actors and deployed weights across windows."""

    stream: Stream
    weights: bytes
    infer: Any
    trainer: Any


def retrain_config_dict(configs: Sequence[RetrainConfig], name: str,
                        seed: int) -> dict[str, Any]:
    """The named configuration as the retraining actor takes it."""
    config = next((c for c in configs if c.name == name), None)
    if config is None:
        raise ConfigError(f"plan names unknown retraining config {name!r}", field="retrain")
    return {"epochs": config.epochs, "batch_size": config.batch_size,
            "last_layer_neurons": config.last_layer_neurons,
            "layers_frozen": config.layers_frozen, "seed": seed, "version_base": 1000 * seed,
            "data_fraction": config.data_fraction}


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


def _planned_accuracy(plan: ContinualPlan, states: Sequence[StreamState],
                      window_s: float) -> dict[str, float]:
    """Per stream, the window-averaged accuracy Algorithm 2 line 7 estimated at the start."""
    acc = {}
    for st in states:
        d = plan.decision(st.name)
        lam = next(o for o in st.inference if o.config == d.inference)
        option = next((o for o in st.retrain if o.config == d.retrain), None)
        factor = inference_factor(lam, _inference_share(d))
        est = estimate_accuracy(st.accuracy, option, factor, d.retrain_share, window_s)
        acc[st.name] = st.accuracy * factor if est is None else est
    return acc


@dataclass(slots=True)
class _Live:
    """A window in progress: the running retrainings (stream → object ref, config, share,
    planned accelerator-seconds left) and the latest plan's predicted completion times."""

    start: float
    refs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    share: dict[str, float] = field(default_factory=dict)
    left_s: dict[str, float] = field(default_factory=dict)
    planned_finish: dict[str, float] = field(default_factory=dict)
    inference_area: dict[str, float] = field(default_factory=dict)
    inference_share: dict[str, float] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    t_last: float = 0.0
    replans: int = 0


def _start_training(r: StreamRun, d: StreamDecision, data: WindowData, settings: RunSettings,
                    index: int, options: Sequence[RetrainOption], live: _Live) -> None:
    now = time.perf_counter() - live.start
    config = retrain_config_dict(settings.retrain_configs, d.retrain or "", index + 1)
    x, y = _fraction(data, config["data_fraction"], settings.seed + index)
    share = min(1.0, d.retrain_share)
    live.refs[r.stream.name] = r.trainer.retrain.remote(
        r.weights, x, y, config, share, settings.window_s - now, r.infer)
    cost = next(o.cost_s for o in options if o.config == d.retrain)
    live.config[r.stream.name], live.share[r.stream.name] = d.retrain or "", share
    live.left_s[r.stream.name] = cost
    live.started[r.stream.name] = now
    live.planned_finish[r.stream.name] = now + cost / share


def _apply(runs: Sequence[StreamRun], plan: ContinualPlan, states: Sequence[StreamState],
           data: dict[str, WindowData], settings: RunSettings, index: int,
           live: _Live) -> None:
    """Give every job its share in ``plan`` (and λ its sampling rate); start the retrainings
    it picks that are not running yet; a running one keeps its configuration (§5)."""
    rates = {lam.name: lam.sampling_rate for lam in settings.inference_configs}
    now = time.perf_counter() - live.start
    for r, st in zip(runs, states, strict=True):
        d, name = plan.decision(r.stream.name), r.stream.name
        running = name in live.refs
        share = _inference_share(d)
        live.inference_share[name] = share
        r.infer.set_share.remote(share, rates[d.inference])
        if running and d.retrain_share > 1e-9:
            live.share[name] = min(1.0, d.retrain_share)
            r.trainer.set_share.remote(live.share[name])
            live.planned_finish[name] = now + live.left_s[name] / live.share[name]
        elif running:  # the scheduler paused it: keep it crawling at the floor
            live.share[name] = MIN_SHARE
            r.trainer.set_share.remote(MIN_SHARE)
            live.planned_finish[name] = now + live.left_s[name] / MIN_SHARE
        elif name not in live.done and d.retrain is not None and d.retrain_share > 1e-9:
            _start_training(r, d, data[name], settings, index, st.retrain, live)


def _advance(live: _Live) -> float:
    """Account the elapsed time: planned work left and inference share-seconds."""
    now = time.perf_counter() - live.start
    for name, share in live.share.items():
        if name in live.refs:
            live.left_s[name] = max(live.left_s[name] - share * (now - live.t_last), 1e-6)
    for name, share in live.inference_share.items():
        live.inference_area[name] = live.inference_area.get(name, 0.0) + \
            share * (now - live.t_last)
    live.t_last = now
    return now


def _replan_states(states: Sequence[StreamState], live: _Live) -> list[StreamState]:
    """Algorithm 1's input after a completion: a finished stream serves its new model (its
    profiled accuracy) and has no retraining; a running one keeps its configuration with
    the work left; the others may still pick any profiled configuration."""
    out = []
    for st in states:
        options = {o.config: o for o in st.retrain}
        if st.name in live.done:
            acc = options[live.config[st.name]].accuracy if live.done[st.name]["finished"] \
                else st.accuracy
            out.append(StreamState(st.name, acc, (), st.inference))
        elif st.name in live.refs:
            o = options[live.config[st.name]]
            out.append(StreamState(st.name, st.accuracy,
                                   (RetrainOption(o.config, o.accuracy, live.left_s[st.name]),),
                                   st.inference))
        else:
            out.append(st)
    return out


def _follow(runs: Sequence[StreamRun], states: Sequence[StreamState],
            data: dict[str, WindowData], settings: RunSettings, index: int, live: _Live,
            planner: Planner | None) -> None:
    """Wait for retrainings to complete; after each completion re-run the scheduler on the
    rest of the window (Algorithm 1: "re-run when a retraining job completes")."""
    import ray

    while live.refs:
        wait = settings.window_s - (time.perf_counter() - live.start)
        ready, _ = ray.wait(list(live.refs.values()), num_returns=1, timeout=max(0.0, wait))
        if not ready:
            return
        now = _advance(live)
        for name, ref in list(live.refs.items()):
            if ref in ready:
                live.done[name] = ray.get(ref)
                del live.refs[name]
        left = settings.window_s - now
        if planner is None or left < 0.02 * settings.window_s:
            continue
        problem = ContinualProblem(tuple(_replan_states(states, live)), 1.0, left,
                                   settings.delta, settings.a_min)
        _apply(runs, planner(problem), states, data, settings, index, live)
        live.replans += 1


def execute_window(runs: Sequence[StreamRun], plan: ContinualPlan,
                   states: Sequence[StreamState], windows: dict[str, Window],
                   data: dict[str, WindowData], settings: RunSettings, index: int,
                   golden: torch.nn.Module, planner: Planner | None) -> WindowResult:
    """Run one window for real: every stream's inference over its live frames and the
    plan's retrainings, re-planning on each completion when ``planner`` is given; then
    measure each stream's window-averaged accuracy against the true and golden labels."""
    import ray

    rates = {lam.name: lam.sampling_rate for lam in settings.inference_configs}
    live = _Live(time.perf_counter())
    jobs = {r.stream.name: r.infer.run_window.remote(
        windows[r.stream.name].x, settings.window_s, rates[plan.decision(r.stream.name).inference],
        _inference_share(plan.decision(r.stream.name))) for r in runs}
    _apply(runs, plan, states, data, settings, index, live)
    _follow(runs, states, data, settings, index, live, planner)
    served = {name: ray.get(ref) for name, ref in jobs.items()}
    _advance(live)
    live.done |= {name: ray.get(ref) for name, ref in live.refs.items()}
    demand = {st.name: next(o.demand for o in st.inference
                            if o.config == plan.decision(st.name).inference) for st in states}
    result = _measure(runs, plan, windows, served, live, settings, golden, index, demand)
    return replace(result, planned_accuracy=_planned_accuracy(plan, states, settings.window_s))


def _measure(runs: Sequence[StreamRun], plan: ContinualPlan, windows: dict[str, Window],
             served: dict[str, dict[str, Any]], live: _Live, settings: RunSettings,
             golden: torch.nn.Module, index: int, demand: dict[str, float]) -> WindowResult:
    """Accuracy per stream; retrainings' epochs, completion times and device-seconds per
    epoch; for inference actors that lagged, the profiled over the measured frame rate per
    unit share (their time-averaged share)."""
    import ray

    rates = {lam.name: lam.sampling_rate for lam in settings.inference_configs}
    accuracy, golden_acc, lag, epochs, epoch_cost, finish = {}, {}, {}, {}, {}, {}
    for r in runs:
        name, w = r.stream.name, windows[r.stream.name]
        labels = np.asarray(served[name]["labels"])
        golden_acc[name] = float((labels == predict(golden, w.x)).mean())
        known = w.y >= 0  # frames without a true label are scored against the golden model
        accuracy[name] = float((labels[known] == w.y[known]).mean()) if known.any() \
            else golden_acc[name]
        candidates = len(w.x) * rates[plan.decision(name).inference]
        if served[name]["analysed"] < 0.9 * candidates:  # it lagged
            share = live.inference_area.get(name, 0.0) / max(live.t_last, 1e-9)
            measured = served[name]["analysed"] / max(share, MIN_SHARE)
            lag[name] = candidates / demand[name] / max(measured, 1e-6)
        done = live.done.get(name)
        epochs[name] = 0 if done is None else int(done["epochs"])
        if done is None:
            continue
        finish[name] = (live.started[name] + float(done["seconds"]) if done["finished"]
                        else float("inf"))
        if done["epochs"] > 0:
            epoch_cost[name] = float(done["device_s"]) / done["epochs"]
            r.weights = done["frame"]
            ray.get(r.infer.load_weights.remote(r.weights, 1000 * (index + 2) - 1))
    return WindowResult(index, plan, accuracy, epochs, epoch_cost, lag,
                        planned_finish_s=dict(live.planned_finish), finish_s=finish,
                        golden_accuracy=golden_acc, replans=live.replans,
                        retrained=dict(live.config),
                        frames={r.stream.name: len(windows[r.stream.name].x) for r in runs},
                        analysed={r.stream.name: int(served[r.stream.name]["analysed"])
                                  for r in runs})
