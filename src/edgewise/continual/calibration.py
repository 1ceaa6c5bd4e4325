"""Profiling the emulated device for the real runtime: inference demands and accuracy
factors (§3.1's inference profiler) and the accelerator-seconds per host CPU second."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from edgewise.continual.problem import InferenceConfig, InferenceOption
from edgewise.nn.continual_models import EdgeCNN, Student, model_from_frame, predict
from edgewise.nn.eager_optim import EagerSGD
from edgewise.nn.streams import Window
from edgewise.nn.tracing import TRACE_LOCK
from edgewise.runtime.colocated import sampled_predictions

if TYPE_CHECKING:
    from edgewise.continual.run import RunSettings, StreamRun

__all__ = ["calibrate_stretch", "offline_inference_options", "profile_inference",
           "stream_inference_options"]


def profile_inference(runs: Sequence[StreamRun], holdout: Window, golden: torch.nn.Module,
                      settings: RunSettings, probe_s: float = 1.0) -> tuple[InferenceOption, ...]:
    """The inference profiler (§3.1), measured on the real actors: each λ's accuracy factor
    from a hold-out window's live frames against golden labels (skipped frames keep the last
    label), and its demand (the share that keeps up) from the frame rate one actor reaches at
    the whole device, all actors probing at once as they will run."""
    import ray

    frames_per_s = len(holdout.x) / settings.window_s
    truth = predict(golden, holdout.x)
    full = predict(model_from_frame(runs[0].weights), holdout.x)
    base = max(float((full == truth).mean()), 1e-6)
    n = max(1, int(frames_per_s * probe_s * 50))
    probe = np.resize(holdout.x, (n, *holdout.x.shape[1:]))
    served = ray.get([r.infer.run_window.remote(probe, probe_s, 1.0, 1.0 / len(runs))
                      for r in runs])
    rate = float(np.median([s["analysed"] for s in served])) * len(runs) / probe_s
    return tuple(_inference_option(lam, full, truth, base, frames_per_s / max(rate, 1e-6))
                 for lam in settings.inference_configs)


def stream_inference_options(model: Student, recent: Window, golden: torch.nn.Module,
                             configs: Sequence[InferenceConfig],
                             options: Sequence[InferenceOption]) -> tuple[InferenceOption, ...]:
    """Re-profile each λ's accuracy factor on this stream's own most recent live frames (the
    previous window, golden-labelled) with the model now deployed, keeping the measured
    demands: an inference profiler that profiles each stream periodically (§3.1, [36]).
    How much frame sampling loses depends on the stream's scene (how long objects stay in
    view) and on the model, so one hold-out stream's factors do not transfer."""
    truth, full = predict(golden, recent.x), predict(model, recent.x)
    base = max(float((full == truth).mean()), 1e-6)
    demand = {o.config: o.demand for o in options}
    out = []
    for lam in configs:
        fresh = _inference_option(lam, full, truth, base, 1.0)
        out.append(InferenceOption(lam.name, fresh.accuracy_factor, demand[lam.name]))
    return tuple(out)


def offline_inference_options(model: Student, holdout: Window, golden: torch.nn.Module,
                              settings: RunSettings) -> tuple[InferenceOption, ...]:
    """The inference profile without actors (for planning only): accuracy factors as in
    :func:`profile_inference`, demand from this process's per-frame CPU time × stretch."""
    frames_per_s = len(holdout.x) / settings.window_s
    truth, full = predict(golden, holdout.x), predict(model, holdout.x)
    base = max(float((full == truth).mean()), 1e-6)
    torch.set_num_threads(1)
    sample = torch.from_numpy(holdout.x[:1])
    with torch.no_grad(), TRACE_LOCK:  # no trace in another thread may capture these calls
        cpu0 = time.thread_time()
        for _ in range(200):
            model(sample).argmax(1)
    frame_s = (time.thread_time() - cpu0) / 200 * settings.stretch
    return tuple(_inference_option(lam, full, truth, base, frames_per_s * frame_s)
                 for lam in settings.inference_configs)


def _inference_option(lam: InferenceConfig, full: np.ndarray, truth: np.ndarray, base: float,
                      full_rate_demand: float) -> InferenceOption:
    step = max(1, round(1.0 / lam.sampling_rate))
    processed = {i: int(full[i]) for i in range(0, len(full), step)}
    acc = float((sampled_predictions(processed, len(full)) == truth).mean())
    return InferenceOption(lam.name, min(1.0, acc / base), max(full_rate_demand / step, 1e-6))


def _host_seconds_per_sample(seconds: float = 0.3, batch: int = 32) -> float:
    """This process's CPU seconds per trained sample on the loop that RetrainActor.spin runs."""
    torch.set_num_threads(1)
    model = EdgeCNN()
    opt = EagerSGD(model.parameters(), lr=0.01)
    x, y = torch.rand(batch, 1, 8, 8), torch.randint(0, 10, (batch,))
    with TRACE_LOCK:  # no trace in another thread may capture these calls
        done, cpu0, wall0 = 0, time.thread_time(), time.perf_counter()
        while time.perf_counter() - wall0 < seconds:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
            opt.step()
            done += batch
    return (time.thread_time() - cpu0) / done


def calibrate_stretch(runs: Sequence[StreamRun], probe_s: float = 1.0) -> float:
    """Accelerator seconds per host CPU second as the retraining actors really run: every
    actor trains at share 1/N at once; their full-device time per sample over this host's
    CPU time per sample (the micro-profiler's epoch times are scaled by it, §4.3)."""
    import ray

    rates = ray.get([r.trainer.spin.remote(probe_s, 1.0 / len(runs)) for r in runs])
    device_s = 1.0 / (float(np.median(rates)) * len(runs))
    return device_s / _host_seconds_per_sample()
