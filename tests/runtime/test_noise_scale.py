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
    """Each worker's gradient is the mean of ``b`` per-sample gradients ``mean + N(0, σ² I)``
    (drawn as one ``N(0, σ²/b I)`` draw, the same distribution); the step's gradient is their
    sample-weighted mean, as the synchronous server's."""
    found = NoiseScale()
    total = sum(batches)
    grads = [mean + rng.normal(0.0, sigma / np.sqrt(b), (steps, mean.size)) for b in batches]
    combined = sum(g * (b / total) for g, b in zip(grads, batches, strict=True))
    squares = [np.einsum("ij,ij->i", g, g) for g in grads]
    combined_sq = np.einsum("ij,ij->i", combined, combined)
    for t in range(steps):
        found.observe([(b, float(sq[t])) for sq, b in zip(squares, batches, strict=True)],
                      float(combined_sq[t]))
    return found


def _truth(mean: np.ndarray, sigma: float) -> float:
    return mean.size * sigma**2 / float(mean @ mean)  # tr(Σ) / |G|²


@settings(max_examples=8, deadline=None)
@given(batches=st.lists(st.integers(4, 64), min_size=2, max_size=4),
       sigma=st.sampled_from([0.5, 1.0, 2.0]), seed=st.integers(0, 2**16))
def test_the_estimate_finds_the_true_noise_scale(batches: list[int], sigma: float,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 1.0, 64)
    found = _steps(rng, batches, mean, sigma, steps=3000)
    assert found.simple() == pytest.approx(_truth(mean, sigma), rel=0.1)


def test_a_worker_holding_most_of_the_batch_does_not_swamp_the_estimate() -> None:
    """Batches 4 and 64, little noise: the 64-sample worker's own estimate divides by
    ``B - b = 4``. Pooled, every one of 20 seeded runs lands within 10 % (a plain mean of the
    two workers' estimates spread 0.185 about the truth here, and missed 10 % in most)."""
    errors = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        mean = rng.normal(0.0, 1.0, 64)
        found = _steps(rng, [4, 64], mean, 0.5, steps=1500).simple()
        assert found is not None
        errors.append(abs(found / _truth(mean, 0.5) - 1.0))
    assert max(errors) < 0.1, errors


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


def test_the_preconditioned_estimate_is_the_noise_scale_of_the_divided_gradients() -> None:
    """Pollux's noise scale for Adam: gradients divided element-wise by ``d`` (Adam's step
    divisor) have ``tr(D⁻¹ Σ D⁻¹) / |D⁻¹ G|²``, which the squared norms with the divisor
    recover; with unequal noise per coordinate it is not the raw gradients' figure."""
    import torch

    from edgewise.runtime.noise_scale import grad_sq as _grad_sq

    rng = np.random.default_rng(3)
    mean, sigma = rng.normal(0.0, 1.0, 32), rng.uniform(0.2, 3.0, 32)
    divisor = rng.uniform(0.1, 2.0, 32)
    truth = float(np.sum(sigma**2 / divisor**2) / np.sum(mean**2 / divisor**2))
    raw_truth = float(np.sum(sigma**2) / np.sum(mean**2))
    found, by_key = NoiseScale(), {"p.float64": torch.from_numpy(divisor)}
    batches = [8, 24, 32]
    for _ in range(3000):
        grads = [mean + (rng.normal(0.0, 1.0, (b, 32)) * sigma).mean(0) for b in batches]
        combined = sum(g * (b / sum(batches)) for g, b in zip(grads, batches, strict=True))
        found.observe([(b, _grad_sq({"p.float64": torch.from_numpy(g)}, by_key))
                       for g, b in zip(grads, batches, strict=True)],
                      _grad_sq({"p.float64": torch.from_numpy(combined)}, by_key))
    assert found.simple() == pytest.approx(truth, rel=0.1)
    assert abs(truth - raw_truth) > 0.2 * truth  # the divisor matters in this case


def test_adams_divisor_is_its_bias_corrected_second_moment_after_five_steps() -> None:
    import torch

    from edgewise.runtime.noise_scale import PRECONDITION_AFTER_STEPS, adam_divisor

    param = torch.nn.Parameter(torch.zeros(6, dtype=torch.float64))
    opt = torch.optim.Adam([param], lr=0.01, betas=(0.9, 0.99), eps=1e-8)
    sgd = torch.optim.SGD([param], lr=0.01)
    rng, second = np.random.default_rng(0), np.zeros(6)
    for step in range(1, PRECONDITION_AFTER_STEPS + 2):
        if step <= PRECONDITION_AFTER_STEPS:  # not yet trusted: no preconditioner
            assert adam_divisor(opt, {"p.float64": param}) is None
        grad = rng.normal(0.0, 1.0, 6)
        second = 0.99 * second + 0.01 * grad**2
        param.grad = torch.from_numpy(grad.copy())
        opt.step()
    steps = PRECONDITION_AFTER_STEPS + 1
    found = adam_divisor(opt, {"p.float64": param})
    assert found is not None
    expected = np.sqrt(second / (1 - 0.99**steps)) + 1e-8
    np.testing.assert_allclose(found["p.float64"].numpy(), expected, rtol=1e-9)
    assert adam_divisor(sgd, {"p.float64": param}) is None
