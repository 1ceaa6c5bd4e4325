"""The gradient noise scale, measured in the synchronous loop (no Ray here).

McCandlish et al., "An Empirical Model of Large-Batch Training" (2018): with ``G`` the true
gradient and ``Σ`` the per-sample gradient covariance, a batch of ``b`` samples gives a
gradient whose squared norm has expectation ``|G|² + tr(Σ)/b``. The *simple noise scale*
``B_simple = tr(Σ) / |G|²`` is the batch size beyond which a larger batch buys little:
training with batch ``B`` makes about ``1 / (1 + B_simple / B)`` of the progress per step of
an infinitely large batch, so a batch far above ``B_simple`` spends samples for nothing.
Pollux (Qiao et al., OSDI 2021) uses the same quantity for its statistical efficiency.

A synchronous step has what the estimate needs: each worker's gradient over its own batch
``b_i`` and their sample-weighted mean over ``B = Σ b_i``. For each worker, the two batch
sizes give unbiased estimates (their Appendix A.1)::

    |G|²   ≈ (B |g_B|² − b_i |g_i|²) / (B − b_i)
    tr(Σ)  ≈ (|g_i|² − |g_B|²) / (1/b_i − 1/B)

Each step's estimates are noisy (and may be negative); as the paper advises, the numerator
and the denominator are averaged over many steps (here: an epoch's) before dividing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NoiseScale"]


@dataclass
class NoiseScale:
    """The running sums of one epoch's estimates of ``|G|²`` and ``tr(Σ)``."""

    gradient_sq_sum: float = 0.0
    trace_sum: float = 0.0
    estimates: int = 0

    def observe(self, workers: Sequence[tuple[int, float]], mean_sq: float) -> None:
        """One synchronous step: each worker's (batch size, squared norm of its gradient),
        and the squared norm of their sample-weighted mean. A step with one worker (or a
        worker that trained every sample) says nothing about the noise and is skipped."""
        total = sum(b for b, _ in workers)
        for batch, sq in workers:
            if batch <= 0 or batch >= total:
                continue
            self.gradient_sq_sum += (total * mean_sq - batch * sq) / (total - batch)
            self.trace_sum += (sq - mean_sq) / (1.0 / batch - 1.0 / total)
            self.estimates += 1

    def simple(self) -> float | None:
        """``B_simple`` in samples, from the estimates so far; None without any, or where the
        averaged ``|G|²`` is not positive (the noise swamps the gradient)."""
        if self.estimates == 0 or self.gradient_sq_sum <= 0:
            return None
        return max(0.0, self.trace_sum / self.gradient_sq_sum)

    def reset(self) -> None:
        self.gradient_sq_sum, self.trace_sum, self.estimates = 0.0, 0.0, 0
