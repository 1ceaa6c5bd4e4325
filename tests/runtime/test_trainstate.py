"""Flat weight, gradient and buffer frames between a worker and the server (no Ray)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from edgewise.runtime.narrowing import rounded
from edgewise.runtime.trainstate import FlatState, mean_pushes
from edgewise.wire.frames import TransportError, WireDtype


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 3))


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(5, 3, 8, 8, generator=g), torch.randint(0, 3, (5,), generator=g)


def _backward(state: FlatState, seed: int) -> None:
    x, y = _batch(seed)
    state.zero_grad()
    nn.functional.cross_entropy(state.model(x), y).backward()
    state.check_grads()


@pytest.mark.parametrize("compression", ["lz4", "none"])
def test_pull_push_round_trip_matches_a_plain_model(compression: str) -> None:
    server, worker, plain = FlatState(_model(0)), FlatState(_model(1)), _model(0)
    worker.load_weights(server.weights_frame(compression, {}))  # type: ignore[arg-type]
    for (_, a), (_, b) in zip(worker.params, server.params, strict=True):
        assert torch.equal(a, b)
    _backward(worker, seed=7)
    pushed = server.read_push(worker.gradients_frame(np.arange(5), compression))  # type: ignore[arg-type]
    server.apply_push(pushed.flats)
    x, y = _batch(7)
    plain.train()
    nn.functional.cross_entropy(plain(x), y).backward()
    for (name, p), q in zip(server.params, plain.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None
        assert torch.allclose(p.grad, q.grad, atol=1e-6), name
    # the server's statistics moved exactly as the plain model's did on the same batch
    for (name, b), c in zip(server.buffers, plain.buffers(), strict=True):
        assert torch.allclose(b.float(), c.float(), atol=1e-6), name
    assert pushed.ids.tolist() == [0, 1, 2, 3, 4]


def test_backward_accumulates_into_the_flat_gradients() -> None:
    state = FlatState(_model(0))
    _backward(state, seed=1)
    flat = state.grads["p.float32"]
    assert flat.abs().sum() > 0
    assert sum(p.grad.abs().sum() for _, p in state.params if p.grad is not None) == \
        pytest.approx(float(flat.abs().sum()), rel=1e-5)


def test_replaced_gradient_is_copied_back() -> None:
    state = FlatState(_model(0))
    _, first = state.params[0]
    first.grad = torch.ones_like(first)  # something replaced a .grad
    state.check_grads()
    assert first.grad is not None and torch.equal(first.grad, torch.ones_like(first))
    assert state.grads["p.float32"][: first.numel()].eq(1).all()


def test_frame_of_another_model_is_refused() -> None:
    small = FlatState(nn.Linear(2, 2))
    with pytest.raises(TransportError, match="layout"):
        FlatState(_model(0)).load_weights(small.weights_frame("none", {}))


def test_synchronous_mean_weights_gradients_by_samples() -> None:
    a, b = FlatState(_model(0)), FlatState(_model(0))
    _backward(a, 1)
    _backward(b, 2)
    server = FlatState(_model(0))
    pa = server.read_push(a.gradients_frame(np.arange(1), "none"))
    pb = server.read_push(b.gradients_frame(np.arange(3), "none"))
    mean = mean_pushes([pa, pb])
    want = 0.25 * a.grads["p.float32"] + 0.75 * b.grads["p.float32"]
    assert torch.allclose(mean["p.float32"], want)
    assert int(mean["b.int64"].max()) == 1  # one step on the counters


@pytest.mark.parametrize(("name", "kwargs"), [("adam", {}), ("sgd", {"momentum": 0.9})])
def test_flat_optimiser_steps_exactly_like_one_per_parameter(name: str,
                                                             kwargs: dict[str, float]) -> None:
    from edgewise.nn.models import make_optimizer

    flat, plain = FlatState(_model(0)), _model(0)
    flat_opt = make_optimizer(name, flat.optimizer_parameters().values(), 0.01, **kwargs)
    plain_opt = make_optimizer(name, plain, 0.01, **kwargs)
    for step in range(3):
        _backward(flat, seed=step)
        x, y = _batch(step)
        plain_opt.zero_grad()
        nn.functional.cross_entropy(plain(x), y).backward()
        flat_opt.step()
        plain_opt.step()
    for (label, p), q in zip(flat.params, plain.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-6), label


def test_lz4_is_skipped_only_where_it_cannot_pay() -> None:
    from edgewise.runtime.trainstate import codec_for

    noise = torch.randn(400_000)
    sparse = torch.zeros(400_000)
    sparse[::10] = 1.0
    assert codec_for(noise, "lz4") == "none"  # float noise: a probe shrinks it by < 5%
    assert codec_for(sparse, "lz4") == "lz4"
    assert codec_for(torch.randn(100), "lz4") == "lz4"  # small tensors are not probed
    assert codec_for(sparse, "none") == "none"


@pytest.mark.parametrize("wire", ["bfloat16", "float16"])
def test_half_precision_frames_carry_the_rounded_values_in_half_the_bytes(wire: str) -> None:
    """A half-precision wire: the worker holds the server's weights rounded once to the
    wire dtype, the server reads the worker's gradients rounded once, both widened to
    float32; buffers and ids arrive exactly; the parameters' bytes are halved."""
    server, worker = FlatState(_model(0), wire), FlatState(_model(1), wire)  # type: ignore[arg-type]
    full = FlatState(_model(0))
    half = getattr(torch, wire)
    worker.load_weights(server.weights_frame("none", {}))
    for (_, a), (_, b) in zip(worker.params, server.params, strict=True):
        assert a.dtype == torch.float32
        assert torch.equal(a, b.detach().to(half).float())
    for (_, a), (_, b) in zip(worker.buffers, server.buffers, strict=True):
        assert torch.equal(a, b)
    _backward(worker, seed=7)
    pushed = server.read_push(worker.gradients_frame(np.arange(5), "none"))
    sent = worker.grads["p.float32"]
    assert pushed.flats["p.float32"].dtype == torch.float32
    assert torch.equal(pushed.flats["p.float32"], sent.to(half).float())
    assert not torch.equal(pushed.flats["p.float32"], sent)  # it did travel narrowed
    assert pushed.ids.tolist() == [0, 1, 2, 3, 4]
    params = sum(t.numel() for k, t in server.flats.items() if k.startswith("p."))
    saved = len(full.weights_frame("none", {})) - len(server.weights_frame("none", {}))
    assert saved == pytest.approx(2 * params, abs=64)
    # what the evaluator reads: the server's weights at float32, not the wire's rounding
    evaluator = FlatState(_model(2), wire)  # type: ignore[arg-type]
    evaluator.load_weights(server.weights_frame("none", {}, narrow=False))
    for (_, a), (_, b) in zip(evaluator.params, server.params, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("wire", ["bfloat16", "float16", "int8"])
def test_a_narrowed_push_carries_its_rounding_into_the_next(wire: WireDtype) -> None:
    """Error feedback: each push is the gradient plus what the last push's rounding lost,
    rounded; so what the server received over many pushes sums to what the worker computed,
    short of one rounding (the residual), where rounding each alone would drift."""
    server, worker = FlatState(_model(0), wire), FlatState(_model(1), wire)
    computed = torch.zeros_like(worker.grads["p.float32"])
    received, alone = torch.zeros_like(computed), torch.zeros_like(computed)
    for step in range(40):
        _backward(worker, seed=step)
        sent = worker.grads["p.float32"]
        computed += sent
        alone += rounded(sent, wire)
        pushed = server.read_push(worker.gradients_frame(np.arange(5), "none"))
        got = pushed.flats["p.float32"]
        assert torch.allclose(got, rounded(got, wire), rtol=1e-6, atol=0)  # it travelled narrowed
        received += got
    residual = worker.residuals["p.float32"]
    assert torch.allclose(received + residual, computed, rtol=0, atol=1e-5)
    assert (received - computed).abs().sum() < (alone - computed).abs().sum() / 4


def test_an_unknown_wire_dtype_is_refused() -> None:
    from edgewise.errors import ConfigError
    from edgewise.runtime.plan import TrainConfig

    with pytest.raises(TransportError, match="wire dtype"):
        FlatState(_model(0), "int4")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        TrainConfig(wire_dtype="float64")  # type: ignore[arg-type]
    assert caught.value.field == "wire_dtype"
    with pytest.raises(ConfigError, match="int8 needs the sync loop") as caught:
        TrainConfig(mode="async", wire_dtype="int8")
    assert caught.value.field == "wire_dtype"
    assert TrainConfig(mode="sync", wire_dtype="int8").wire == "int8"
