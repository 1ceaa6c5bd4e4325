"""Real profile traces for the simulator (§6.1): retrain the edge model on drifting digits
streams with every configuration and log accuracy over compute time, as the paper's testbed
logged its traces."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from edgewise.continual.microprofiler import WindowData, prepare_window
from edgewise.continual.problem import RetrainConfig, default_retrain_configs
from edgewise.continual.profiles import Curve, Trace, write_trace
from edgewise.errors import ConfigError
from edgewise.nn.continual_models import (
    EdgeCNN,
    accuracy,
    golden_model,
    predict,
    pretrained_edge,
    retrain,
)
from edgewise.nn.streams import DigitsStream, digits_streams
from edgewise.runtime.colocated import sampled_predictions

__all__ = ["SUBSAMPLING", "real_trace", "write_real_trace"]

SUBSAMPLING = (1.0, 0.75, 0.5, 0.25, 0.1)


def _curve(model: EdgeCNN, data: WindowData, config: RetrainConfig, stretch: float,
           seed: int) -> tuple[Curve, EdgeCNN]:
    """Retrain with ``config`` on its share of the data; (compute_s, accuracy) after every
    epoch, compute in accelerator-seconds (host CPU seconds × stretch)."""
    n = max(1, round(config.data_fraction * len(data.train_y)))
    idx = np.random.default_rng([seed, 23]).permutation(len(data.train_y))[:n]
    times, accs = [0.0], [accuracy(model, data.val_x, data.val_y)]
    clock = [time.thread_time(), 0.0]

    def record(epoch: int, student: EdgeCNN) -> None:
        clock[1] += time.thread_time() - clock[0]
        times.append(clock[1] * stretch)
        accs.append(accuracy(student, data.val_x, data.val_y))
        clock[0] = time.thread_time()

    final = retrain(model, data.train_x[idx], data.train_y[idx], epochs=config.epochs,
                    batch_size=config.batch_size, neurons=config.last_layer_neurons,
                    frozen_layers=config.layers_frozen, seed=seed, on_epoch=record)
    # the point before retraining is the deployed model: the curve starts at compute 0
    return Curve(tuple(times), tuple(accs)), final


def _inference_factors(stream: DigitsStream, model: EdgeCNN, golden: EdgeCNN | object,
                       ) -> tuple[float, ...]:
    """Fraction of accuracy kept at each subsampling rate on the stream's first window."""
    import torch

    if not isinstance(golden, torch.nn.Module):
        raise ConfigError("golden must be a torch module", field="golden")
    w = stream.window(0)
    truth, full = predict(golden, w.x), predict(model, w.x)
    base = max(float((full == truth).mean()), 1e-6)
    factors = []
    for rate in SUBSAMPLING:
        step = max(1, round(1.0 / rate))
        kept = {i: int(full[i]) for i in range(0, len(full), step)}
        factors.append(min(1.0, float((sampled_predictions(kept, len(full)) == truth).mean())
                           / base))
    return tuple(factors)


def real_trace(n_streams: int = 3, n_windows: int = 3, seed: int = 0, stretch: float = 15.0,
               demand: float = 0.3, configs: Sequence[RetrainConfig] | None = None,
               progress: Callable[[str, float], None] | None = None) -> Trace:
    """A :class:`Trace` measured on digits streams: every configuration retrained in every
    window from the model deployed then (the previous window's most accurate retraining);
    ``retained`` is that model's accuracy on the new window over its accuracy on the old.
    ``demand`` (share for full-rate inference) is a parameter: it depends on the frame rate
    and the device, not on the data."""
    configs = tuple(configs or default_retrain_configs())
    golden = golden_model(seed)
    curves: dict[tuple[int, str, str], Curve] = {}
    retained: dict[tuple[int, str], float] = {}
    initial, factors = {}, {}
    streams = digits_streams(n_streams, seed=seed, n_windows=n_windows)
    for k, stream in enumerate(streams):
        model = pretrained_edge(seed)
        factors[stream.name] = _inference_factors(stream, model, golden)
        previous: float | None = None
        for w in range(n_windows):
            data = prepare_window(stream.window(w), golden, seed=seed)
            start = accuracy(model, data.val_x, data.val_y)
            if previous is None:
                initial[stream.name] = start
            else:
                retained[(w, stream.name)] = start / max(previous, 1e-6)
            best: tuple[float, EdgeCNN] | None = None
            for c in configs:
                curve, final = _curve(model, data, c, stretch, seed + w)
                curves[(w, stream.name, c.name)] = curve
                if best is None or curve.final > best[0]:
                    best = (curve.final, final)
            assert best is not None
            previous, model = best
            if progress is not None:
                progress(f"{stream.name} window {w}", (k * n_windows + w + 1)
                         / (n_streams * n_windows))
    names = tuple(s.name for s in streams)
    return Trace(names, initial, dict.fromkeys(names, demand), n_windows,
                 tuple(c.name for c in configs), curves, retained, SUBSAMPLING, factors)


def write_real_trace(directory: str | Path, **kwargs: object) -> Path:
    """Measure :func:`real_trace` (keyword arguments as there) and write its CSV files."""
    return write_trace(real_trace(**kwargs), directory)  # type: ignore[arg-type]
