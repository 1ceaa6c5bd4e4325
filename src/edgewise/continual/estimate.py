"""EstimateAccuracy and PickConfigs of Ekya's Algorithm 2, scalar and vectorised over shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.problem import InferenceOption, RetrainOption, StreamState

__all__ = [
    "EPS",
    "StreamTable",
    "checkpoint_value",
    "estimate_accuracy",
    "inference_factor",
    "pick_inference",
    "stream_table",
]

EPS = 1e-9  # shares are sums of Δ steps: compare with a tolerance

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def inference_factor(option: InferenceOption, share: float) -> float:
    """The fraction of the model's accuracy that λ keeps with ``share`` accelerators: its
    profiled factor, scaled down by share/demand when the share cannot keep up (the frames it
    cannot analyse are dropped, as in Figure 4c: 65% → 49% at 3/4 of the demand)."""
    return option.accuracy_factor * min(1.0, share / option.demand)


def pick_inference(stream: StreamState, share: float,
                   a_min: float) -> tuple[InferenceOption, bool]:
    """Algorithm 2 lines 3-4: the λ with the highest accuracy within ``share``, and whether it
    keeps the deployed model's inference accuracy ≥ a_MIN. A λ whose demand exceeds the share
    counts with its degraded accuracy (it drops the frames it cannot analyse): the paper's
    pool of λ that keep up in full makes accuracy a step function of the share, on whose
    plateaus Algorithm 1's Δ-steps never improve (a documented deviation; the pool's choice
    is always a candidate, so the pick is never worse)."""
    best = max(stream.inference, key=lambda o: inference_factor(o, share))
    return best, stream.accuracy * inference_factor(best, share) >= a_min - EPS


def estimate_accuracy(model_accuracy: float, retrain: RetrainOption | None,
                      factor: float, retrain_share: float, window_s: float) -> float | None:
    """Algorithm 2 line 7: instantaneous inference accuracy averaged over the window. The old
    model serves until retraining ends at cost/R (the micro-profiler's full-accelerator cost
    scaled to the share, §4.3); the new model serves for the rest. None when the retraining
    cannot finish within the window (first constraint of Eq. 1)."""
    if retrain is None:
        return model_accuracy * factor
    if retrain_share <= EPS:
        return None
    duration = retrain.cost_s / retrain_share
    if duration > window_s + EPS:
        return None
    done = duration / window_s
    return factor * (model_accuracy * done + retrain.accuracy * (1.0 - done))


@dataclass(frozen=True, slots=True)
class StreamTable:
    """PickConfigs for one stream tabulated over a grid of shares: the window-averaged
    accuracy at (R = shares[i], I = shares[j]) is ``retrain_value[i] * infer_factor[j]``
    (λ is picked from I alone and γ from R alone, so the table factorises)."""

    retrain_value: FloatArray  # max over γ ∪ {∅} of the window-average of model accuracy
    retrain_pick: IntArray  # index into stream.retrain, -1 for no retraining
    infer_factor: FloatArray
    infer_pick: IntArray  # index into stream.inference
    infer_ok: NDArray[np.bool_]  # the a_MIN floor holds


def checkpoint_value(model_accuracy: float, option: RetrainOption, shares: FloatArray,
                     window_s: float) -> FloatArray:
    """Checkpoint-aware EstimateAccuracy (§5, "model checkpointing and reloading"): the
    model accuracy averaged over the window when inference serves each epoch's checkpoint
    as it is written (``option.checkpoints``), then the retrained model; a retraining that
    does not finish still serves its last checkpoint until the window ends. Per share R
    (retraining reaches compute c at c / R seconds); -inf where R is 0."""
    shares = np.asarray(shares, dtype=np.float64)
    points = [*option.checkpoints, (option.cost_s, option.accuracy)]
    rate = np.maximum(shares, EPS)
    served, area, start = model_accuracy, np.zeros(shares.shape), np.zeros(shares.shape)
    for compute_s, accuracy in points:
        until = np.minimum(compute_s / rate, window_s)
        area += served * (until - start)
        served, start = accuracy, until
    area += served * (window_s - start)
    return np.where(shares > EPS, area / window_s, -np.inf)


def _retrain_estimate(stream: StreamState, opt: RetrainOption, shares: FloatArray,
                      window_s: float, checkpoints: bool) -> FloatArray:
    """Line 7 over the grid: -inf where the option is no candidate at that share."""
    if checkpoints:
        return checkpoint_value(stream.accuracy, opt, shares, window_s)
    done = opt.cost_s / np.maximum(shares, EPS) / window_s  # fraction of ‖T‖ retraining
    fits = (shares > EPS) & (done <= 1.0 + EPS)
    return np.where(fits, stream.accuracy * np.minimum(done, 1.0)
                    + opt.accuracy * (1.0 - np.minimum(done, 1.0)), -np.inf)


def stream_table(stream: StreamState, shares: FloatArray, window_s: float,
                 a_min: float, checkpoints: bool = False) -> StreamTable:
    """Algorithm 2 for one stream, vectorised over every share on the grid; with
    ``checkpoints``, line 7 is the checkpoint-aware estimate (``checkpoint_value``)."""
    shares = np.asarray(shares, dtype=np.float64)
    value = np.full(shares.shape, stream.accuracy)
    pick = np.full(shares.shape, -1, dtype=np.int64)
    for k, opt in enumerate(stream.retrain):
        est = _retrain_estimate(stream, opt, shares, window_s, checkpoints)
        fits = np.isfinite(est)
        better = fits & (est > value)
        value = np.where(better, est, value)
        pick = np.where(better, k, pick)
    factors = np.array([o.accuracy_factor for o in stream.inference])
    demands = np.array([o.demand for o in stream.inference])
    effective = factors[None, :] * np.minimum(1.0, shares[:, None] / demands[None, :])
    infer = effective.max(axis=1)
    ok = stream.accuracy * infer >= a_min - EPS
    return StreamTable(value, pick.astype(np.int64), infer,
                       effective.argmax(axis=1).astype(np.int64), ok)
