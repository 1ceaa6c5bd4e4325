"""Online estimate of the epochs a model update needs (Deep-Edge's accuracy monitor, which
refines the user's estimate each epoch "using logistic regression, similar to Optimus").

Optimus fits the training loss as l(k) = 1 / (β0·k + β1) + β2 with β ≥ 0. The monitor sees
validation accuracy, so it fits the mirrored curve a(k) = β2 − 1 / (β0·k + β1), β ≥ 0, by
bounded least squares (scipy), and solves a(k) = target for k.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

__all__ = ["ConvergenceFit", "epochs_to_target", "fit_accuracy_curve"]


@dataclass(frozen=True, slots=True)
class ConvergenceFit:
    """a(k) = plateau − 1 / (rate·k + offset) for epoch k = 1, 2, ..."""

    rate: float
    offset: float
    plateau: float

    def accuracy(self, epoch: float) -> float:
        return self.plateau - 1.0 / (self.rate * epoch + self.offset)


def fit_accuracy_curve(accuracies: Sequence[float]) -> ConvergenceFit | None:
    """Fit the curve to the accuracies after epochs 1..n; None with fewer than 3 points."""
    if len(accuracies) < 3:
        return None
    k = np.arange(1, len(accuracies) + 1, dtype=np.float64)
    y = np.asarray(accuracies, dtype=np.float64)

    def residual(beta: np.ndarray) -> np.ndarray:
        out: np.ndarray = beta[2] - 1.0 / (beta[0] * k + beta[1]) - y
        return out

    start = np.array([1.0, 1.0 / max(1e-3, y.max() - y[0] + 0.1), min(1.0, y.max() + 0.05)])
    fit = least_squares(residual, start, bounds=([0.0, 1e-3, 0.0], [1e3, 1e3, 1.0]))
    return ConvergenceFit(float(fit.x[0]), float(fit.x[1]), float(fit.x[2]))


def epochs_to_target(accuracies: Sequence[float], target: float, cap: int = 1000) -> int | None:
    """Epochs in total needed to reach ``target`` accuracy by the fitted curve: the epochs
    already run if it was reached, None if the curve's plateau stays below it (or beyond
    ``cap``), or if there are too few points to fit."""
    for epoch, acc in enumerate(accuracies, start=1):
        if acc >= target:
            return epoch
    fit = fit_accuracy_curve(accuracies)
    if fit is None or fit.plateau <= target or fit.rate <= 0:
        return None
    k = (1.0 / (fit.plateau - target) - fit.offset) / fit.rate
    needed = max(len(accuracies) + 1, math.ceil(k))
    return needed if needed <= cap else None
