"""A seeded SYNTHETIC profile trace whose shapes follow the paper's Figures 2-3 (not measured).

Shapes (all draws from one ``numpy.random.Generator``):

- Cost (Figure 3: a wide spread, up to ~200×): accelerator-seconds proportional to epochs ×
  data fraction × the trainable share of the network (1.0, 0.45, 0.2 with 0, 2, 3 of the
  four layers frozen), times a per-stream speed in [0.8, 1.25]; the most expensive default
  configuration costs about ``full_cost_s``.
- End accuracy (Figure 3a: diminishing returns; fewer trainable layers, lower ceiling):
  start + (ceiling − start) · capacity · (1 − exp(−epochs · fraction / 6)), capacity 1.0,
  0.85, 0.65 for 0, 2, 3 frozen layers, plus N(0, 0.01) noise; each (window, stream) draws a
  ceiling in [0.80, 0.95].
- Curves over compute: saturating, a(t) = start + (end − start)(1 − e^{−3t/c})/(1 − e^{−3}).
- Drift (Figure 2b: up to 22% drop without retraining): a model keeps U[0.78, 0.97] of its
  accuracy when moving to the next window.
- Inference (frame subsampling, §6.1): accuracy factor rate^α with α ~ U[0.4, 1.0]; full-rate
  demand U[0.25, 0.5] accelerators per stream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from edgewise.continual.problem import RetrainConfig, default_retrain_configs
from edgewise.continual.profiles import Curve, Trace

__all__ = ["synthetic_trace"]

_TRAINABLE = {0: 1.0, 1: 0.7, 2: 0.45, 3: 0.2}
_CAPACITY = {0: 1.0, 1: 0.93, 2: 0.85, 3: 0.65}
_RATES = (1.0, 0.75, 0.5, 0.25, 0.1)


def _curve(start: float, end: float, cost_s: float, points: int = 6) -> Curve:
    t = np.linspace(0.0, cost_s, points)
    shape = (1 - np.exp(-3 * t / cost_s)) / (1 - math.exp(-3))
    return Curve(tuple(float(x) for x in t), tuple(float(x) for x in start + (end - start) * shape))


def synthetic_trace(n_streams: int, n_windows: int, seed: int = 0, *,
                    configs: Sequence[RetrainConfig] | None = None,
                    full_cost_s: float = 400.0) -> Trace:
    """A synthetic trace for ``n_streams`` streams over ``n_windows`` windows (see module doc).
    Same seed, same trace; stream i is named ``s{i:02d}``."""
    rng = np.random.default_rng(seed)
    cfgs = tuple(configs) if configs is not None else default_retrain_configs()
    top = max(c.epochs * c.data_fraction * _TRAINABLE.get(c.layers_frozen, 0.2) for c in cfgs)
    streams = tuple(f"s{i:02d}" for i in range(n_streams))
    curves: dict[tuple[int, str, str], Curve] = {}
    retained: dict[tuple[int, str], float] = {}
    initial = {s: float(rng.uniform(0.7, 0.9)) for s in streams}
    speed = {s: float(rng.uniform(0.8, 1.25)) for s in streams}
    for w in range(n_windows):
        for s in streams:
            keep = float(rng.uniform(0.78, 0.97))
            retained[(w, s)] = keep
            start = initial[s] if w == 0 else float(rng.uniform(0.55, 0.8))
            ceiling = float(rng.uniform(0.80, 0.95))
            for c in cfgs:
                work = c.epochs * c.data_fraction * _TRAINABLE.get(c.layers_frozen, 0.2)
                gain = _CAPACITY.get(c.layers_frozen, 0.65) * (
                    1 - math.exp(-c.epochs * c.data_fraction / 6))
                end = start + (ceiling - start) * gain + float(rng.normal(0, 0.01))
                curves[(w, s, c.name)] = _curve(start, float(np.clip(end, 0, 1)),
                                                full_cost_s * speed[s] * work / top)
    alphas = rng.uniform(0.4, 1.0, size=n_streams)
    return Trace(streams, initial, {s: float(rng.uniform(0.25, 0.5)) for s in streams},
                 n_windows, tuple(c.name for c in cfgs), curves, retained, _RATES,
                 {s: tuple(float(r ** a) for r in _RATES) for s, a in zip(streams, alphas,
                                                                            strict=True)})
