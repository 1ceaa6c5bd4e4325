"""Learning curves (§4.3): the Optimus-style model the micro-profiler fits, and its NNLS fit.

Learning curve. The paper fits "the non-linear curve model from [64]" (Optimus) "using a
non-negative least squares solver". Optimus models the loss as l(k) = 1/(β0·k + β1) + β2;
for accuracy we fit the mirrored family a(x) = p − 1/(β0·x + β1), β0, β1 ≥ 0, p ≤ 1, where
x counts epochs of the configuration's full data (samples processed ÷ its data size, so that
5 epochs on a 10% sample are 0.5 epochs of all the data). For a fixed plateau p the model is
linear: 1/(p − a) = β0·x + β1, solved by ``scipy.optimize.nnls`` with rows weighted by
(p − a)² (the linearisation's Jacobian, so residuals are in accuracy units); p is searched on
a grid above the best observed accuracy. The accuracy before retraining is the point x = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from edgewise.errors import ConfigError
from edgewise.perf.convergence import ConvergenceFit

__all__ = ["LearningCurve", "fit_learning_curve"]


@dataclass(frozen=True, slots=True)
class LearningCurve(ConvergenceFit):
    """a(x) = plateau − 1 / (rate·x + offset), x in epochs of all the data (Deep-Edge's
    convergence law, `perf.convergence`), clipped to an accuracy in [0, 1]."""

    def accuracy(self, epoch: float) -> float:
        return float(np.clip(ConvergenceFit.accuracy(self, epoch), 0.0, 1.0))


def _nnls_at(p: float, x: NDArray[np.float64], a: NDArray[np.float64]) -> tuple[float, float,
                                                                               float]:
    """(β0, β1, residual in accuracy units) for plateau ``p``."""
    gap = np.maximum(p - a, 1e-6)
    w = gap**2
    design = np.stack([x, np.ones_like(x)], axis=1) * w[:, None]
    beta, _ = nnls(design, w / gap)
    pred = p - 1.0 / np.maximum(beta[0] * x + beta[1], 1e-9)
    return float(beta[0]), float(beta[1]), float(np.sum((pred - a) ** 2))


def fit_learning_curve(x: Sequence[float], acc: Sequence[float]) -> LearningCurve:
    """Fit a(x) = p − 1/(β0·x + β1) to observed (x, accuracy) points by NNLS (see module
    docstring); needs at least two points with distinct x."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(acc, dtype=np.float64)
    if xs.shape != ys.shape or len(xs) < 2 or len(np.unique(xs)) < 2:
        raise ConfigError("need at least two points at distinct x", field="learning_curve")
    if np.any(xs < 0) or np.any((ys < 0) | (ys > 1)):
        raise ConfigError("x must be >= 0 and accuracies in [0, 1]", field="learning_curve")
    lo = float(ys.max()) + 1e-3
    grid = np.unique(np.concatenate([lo + (1.0 + 1e-3 - lo) * np.linspace(0, 1, 60) ** 2,
                                     [max(lo, 1.0 + 1e-3)]]))
    best = min(((*_nnls_at(float(p), xs, ys), float(p)) for p in grid), key=lambda t: t[2])
    rate, offset, _, plateau = best
    return LearningCurve(rate, max(offset, 1e-9), plateau)
