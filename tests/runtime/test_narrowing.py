"""Narrowing for the wire (``runtime.narrowing``): half precision is a cast; ``int8`` keeps
every value within half a step of its block's scale and travels in a quarter of the bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from edgewise.runtime.narrowing import BLOCK, SCALE_SUFFIX, narrow, rounded, widen
from edgewise.wire.frames import TransportError, decode, encode, raw_nbytes, to_torch

_FINITE = st.floats(-1e4, 1e4, width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.integers(1, 3 * BLOCK + 7), elements=_FINITE))
def test_int8_keeps_every_value_within_half_a_step_of_its_block(values: np.ndarray) -> None:
    x = torch.from_numpy(values)
    sent = narrow("p.float32", x, "int8")
    codes, scale = sent["p.float32"], sent["p.float32" + SCALE_SUFFIX]
    assert codes.dtype == torch.int8 and codes.shape == x.shape
    assert scale.numel() == -(-x.numel() // BLOCK)
    back = widen(sent)["p.float32"]
    assert set(widen(sent)) == {"p.float32"}  # the scales are folded in
    for b in range(scale.numel()):  # the oracle: a block's largest magnitude over 127 levels
        block = slice(b * BLOCK, (b + 1) * BLOCK)
        step = float(np.abs(values[block]).max()) / 127
        err = (back[block] - x[block]).abs().max().item()
        assert err <= step / 2 * (1 + 1e-5) + 1e-30
    assert torch.equal(rounded(x, "int8"), back)


def test_tiny_and_huge_blocks_keep_their_bound() -> None:
    x = torch.tensor([1e-40, -3e-41, 0.0, 2e-45] * 64 + [3e38, -1e38] * 128, dtype=torch.float32)
    back = widen(narrow("g", x, "int8"))["g"]
    assert torch.isfinite(back).all()
    for block in (slice(0, BLOCK), slice(BLOCK, 2 * BLOCK)):
        step = x[block].abs().max().item() / 127
        assert (back[block] - x[block]).abs().max().item() <= step / 2 * (1 + 1e-5) + 1e-44


def test_a_block_of_zeros_stays_zero_and_int8_is_a_quarter_of_the_bytes() -> None:
    x = torch.randn(10 * BLOCK, generator=torch.Generator().manual_seed(0))
    x[:BLOCK] = 0.0
    back = widen(narrow("g", x, "int8"))["g"]
    assert torch.equal(back[:BLOCK], torch.zeros(BLOCK))
    full = len(encode({"g": x}, compression="none"))
    small = len(encode(narrow("g", x, "int8"), compression="none"))
    assert raw_nbytes(narrow("g", x, "int8")) == 10 * BLOCK + 10 * 4  # codes, a scale a block
    assert raw_nbytes({"g": x}) == 4 * 10 * BLOCK
    assert small < full / 3  # the frame's header is the same few hundred bytes
    through = widen(to_torch(decode(encode(narrow("g", x, "int8"), compression="lz4"))))
    assert torch.equal(through["g"], back)  # the frame carries codes and scales unchanged


@pytest.mark.parametrize("wire", ["bfloat16", "float16"])
def test_half_precision_is_a_cast(wire: str) -> None:
    x = torch.randn(300, generator=torch.Generator().manual_seed(1))
    sent = narrow("g", x, wire)  # type: ignore[arg-type]
    assert list(sent) == ["g"] and sent["g"].dtype == getattr(torch, wire)
    assert torch.equal(widen(sent)["g"], x.to(getattr(torch, wire)).float())
    assert widen(narrow("g", x, "float32"))["g"] is x


def test_malformed_int8_frames_are_refused() -> None:
    x = torch.randn(2 * BLOCK + 1)
    sent = narrow("g", x, "int8")
    with pytest.raises(TransportError, match="3 float32 scales, got 2"):
        widen({"g": sent["g"], "g.scale": sent["g.scale"][:2]})
    with pytest.raises(TransportError, match="float32 scales"):
        widen({"g": sent["g"], "g.scale": sent["g.scale"].double()})
    with pytest.raises(TransportError, match="without its codes"):
        widen({"h.scale": sent["g.scale"]})
