"""The gradient noise scale estimator against gradients drawn with a known mean and
covariance: ``B_simple = tr(Σ) / |G|²`` exactly, the estimate within a few per cent over
many steps, whatever the workers' batch sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.runtime.noise_scale import NoiseScale


def _steps(rng: np.random.Generator, batches: list[int], mean: np.ndarray, sigma: float,
           steps: int) -> NoiseScale:
    """Each worker's gradient is the mean of ``b`` per-sample gradients ``mean + N(0, σ² I)``;
    the step's gradient is their sample-weighted mean, as the synchronous server's."""
    found = NoiseScale()
    total = sum(batches)
    for _ in range(steps):
        grads = [mean + rng.normal(0.0, sigma, (b, mean.size)).mean(0) for b in batches]
        combined = sum(g * (b / total) for g, b in zip(grads, batches, strict=True))
        found.observe([(b, float(g @ g)) for g, b in zip(grads, batches, strict=True)],
                      float(combined @ combined))
    return found


@settings(max_examples=8, deadline=None)
@given(batches=st.lists(st.integers(4, 64), min_size=2, max_size=4),
       sigma=st.sampled_from([0.5, 1.0, 2.0]), seed=st.integers(0, 2**16))
def test_the_estimate_finds_the_true_noise_scale(batches: list[int], sigma: float,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 1.0, 64)
    truth = mean.size * sigma**2 / float(mean @ mean)  # tr(Σ) / |G|²
    found = _steps(rng, batches, mean, sigma, steps=1500)
    assert found.simple() == pytest.approx(truth, rel=0.1)


def test_one_worker_or_no_step_gives_no_estimate() -> None:
    alone = NoiseScale()
    alone.observe([(32, 4.0)], 4.0)  # B == b: the two batch sizes are one
    assert alone.simple() is None and alone.estimates == 0
    assert NoiseScale().simple() is None


def test_reset_forgets_the_epoch() -> None:
    found = _steps(np.random.default_rng(0), [8, 24], np.ones(16), 1.0, steps=50)
    assert found.simple() is not None
    found.reset()
    assert found.simple() is None and found.estimates == 0
