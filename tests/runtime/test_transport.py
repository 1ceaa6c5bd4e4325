"""Tests of the tensor wire format: round trips, compression, and malformed frames."""

from __future__ import annotations

import contextlib
import json
import pickle
import struct
import time
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edgewise.errors import EdgewiseError
from edgewise.runtime import microbench
from edgewise.runtime.microbench import (
    lz4_compress_mb_s,
    roundtrip_via,
    transport_roundtrip_ms_1mb,
)
from edgewise.runtime.transport import receive
from edgewise.wire.frames import (
    DTYPES,
    MAGIC,
    MAX_HEADER_BYTES,
    VERSION,
    TransportError,
    decode,
    encode,
    to_torch,
)
from edgewise.wire.state import decode_state_dict, encode_state_dict

PRELUDE = struct.Struct("<4sHHI")
NUMPY_DTYPES = [d for name, d in DTYPES.items() if name != "bfloat16"]
TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]  # fmt: skip
SHAPES = [(), (0,), (3, 0, 2), (1,), (7,), (2, 3, 5)]


def _frame(
    header: Any, payload: bytes = b"", *, magic: bytes = MAGIC, version: int = VERSION
) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return PRELUDE.pack(magic, version, 0, len(text)) + text + payload


def _entry(**over: Any) -> dict[str, Any]:
    entry = {"name": "t", "dtype": "float32", "shape": [2], "offset": 0, "length": 8,
             "codec": "none"}  # fmt: skip
    return entry | over


@pytest.mark.parametrize("compression", ["lz4", "none"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_round_trip_every_dtype_and_shape(dtype: torch.dtype, shape: tuple[int, ...],
                                                compression: str) -> None:  # fmt: skip
    # Prepare
    source = (torch.arange(int(np.prod(shape)), dtype=torch.float64) % 3).reshape(shape).to(dtype)
    # Execute
    decoded = decode(encode({"x": source}, compression=compression))  # type: ignore[arg-type]
    back = to_torch(decoded)["x"]
    # Assert
    assert back.dtype == dtype and back.shape == source.shape
    assert torch.equal(back, source)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_round_trip_every_dtype(dtype: np.dtype[Any]) -> None:
    source = (np.arange(24) % 2).astype(dtype).reshape(2, 3, 4)
    arrays = receive(encode({"a": source}))
    assert arrays["a"].dtype == source.dtype and np.array_equal(arrays["a"], source)


def test_non_contiguous_and_big_endian_inputs() -> None:
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    inputs: dict[str, Any] = {"t": base.transpose(2, 0, 1), "s": base[:, ::2, 1::3],
              "be": base.astype(">i4"), "tt": torch.from_numpy(base).permute(1, 2, 0),
              "grad": torch.ones(3, requires_grad=True) * 2}  # fmt: skip
    back = to_torch(decode(encode(inputs)))
    for name, value in inputs.items():
        expected = (
            value.detach()
            if isinstance(value, torch.Tensor)
            else torch.from_numpy(np.ascontiguousarray(value).astype(value.dtype.newbyteorder("=")))
        )
        assert torch.equal(back[name], expected), name


def test_meta_order_and_state_dict() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    state = model.state_dict()
    frame = encode_state_dict(state, meta={"step": 7, "ids": [1, 2]})
    back = decode_state_dict(frame)
    assert list(back) == list(state)
    assert all(torch.equal(back[k], v) for k, v in state.items())
    assert decode(frame).meta == {"step": 7, "ids": [1, 2]}
    model.load_state_dict(back)


def test_uncompressed_arrays_are_zero_copy_views_of_the_frame() -> None:
    frame = encode({"a": np.arange(16, dtype=np.int64)}, compression="none")
    array = receive(frame)["a"]
    assert not array.flags.owndata and not array.flags.writeable and array.flags.aligned
    assert to_torch(decode(frame))["a"].numpy().flags.writeable


def test_lz4_shrinks_a_compressible_payload() -> None:
    grad = np.zeros(100_000, dtype=np.float32)
    grad[::50] = 1.5
    packed, raw = encode({"g": grad}), encode({"g": grad}, compression="none")
    assert len(packed) < len(raw) / 10
    assert np.array_equal(receive(packed)["g"], grad)


def test_incompressible_tensor_travels_raw() -> None:
    noise = np.random.default_rng(0).normal(size=10_000).astype(np.float32)
    frame = encode({"n": noise})
    length = PRELUDE.unpack_from(frame)[3]
    header = json.loads(frame[PRELUDE.size : PRELUDE.size + length])
    assert header["tensors"][0]["codec"] == "none"
    assert (PRELUDE.size + length) % 8 == 0


@settings(max_examples=60, deadline=None)
@given(
    array=hnp.arrays(
        dtype=st.sampled_from(NUMPY_DTYPES),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6),
    ),
    compression=st.sampled_from(["lz4", "none"]),
)
def test_random_arrays_round_trip_exactly(array: np.ndarray, compression: str) -> None:
    back = receive(encode({"a": array, "b": np.flip(array)}, compression=compression))  # type: ignore[arg-type]
    assert back["a"].tobytes() == array.tobytes() and back["a"].shape == array.shape
    assert back["b"].tobytes() == np.ascontiguousarray(np.flip(array)).tobytes()


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"", "shorter"),
        (b"EWT", "shorter"),
        (_frame({"tensors": []}, magic=b"NOPE"), "magic"),
        (_frame({"tensors": []}, version=2), "version"),
        (PRELUDE.pack(MAGIC, VERSION, 0, MAX_HEADER_BYTES + 1), "too long"),
        (PRELUDE.pack(MAGIC, VERSION, 0, 50) + b"{}", "truncated"),
        (PRELUDE.pack(MAGIC, VERSION, 1, 2) + b"{}", "flags"),
        (_frame(b"{not json"), "JSON"),
        (_frame(b"\xff\xfe"), "JSON"),
        (_frame(b"[" * 100_000), "JSON"),
        (_frame([]), "object"),
        (_frame({"tensors": {}}), "object"),
        (_frame({"tensors": [], "meta": [1]}), "meta"),
        (_frame({"tensors": [1]}), "entry"),
        (_frame({"tensors": [_entry(dtype="object")]}, bytes(8)), "dtype"),
        (_frame({"tensors": [_entry(dtype="complex64")]}, bytes(8)), "dtype"),
        (_frame({"tensors": [_entry(shape=[-2])]}, bytes(8)), "shape"),
        (_frame({"tensors": [_entry(shape=[True, 2])]}, bytes(8)), "shape"),
        (_frame({"tensors": [_entry(shape=[2.0])]}, bytes(8)), "shape"),
        (_frame({"tensors": [_entry(shape=[1] * 40)]}, bytes(4)), "shape"),
        (_frame({"tensors": [_entry(shape=[3])]}, bytes(8)), "shape needs"),
        (_frame({"tensors": [_entry()]}, bytes(4)), "payload"),
        (_frame({"tensors": [_entry()]}, bytes(12)), "payload"),
        (_frame({"tensors": [_entry(offset=1.0)]}, bytes(8)), "offset"),
        (_frame({"tensors": [_entry(offset=4)]}, bytes(12)), "offset"),
        (_frame({"tensors": [_entry(codec="zstd")]}, bytes(8)), "codec"),
        (_frame({"tensors": [_entry(name="")]}, bytes(8)), "name"),
        (_frame({"tensors": [_entry(), _entry(offset=8)]}, bytes(16)), "repeated"),
        (_frame({"tensors": [_entry(codec="lz4", length=3)]}, b"\xff\xff\xff"), "LZ4"),
        (_frame({"tensors": [_entry(codec="lz4", length=2)]}, b"\x10\x00"), "LZ4|decompressed"),
        (_frame({"tensors": [_entry(dtype="bool", shape=[8])]}, bytes(7) + b"\x07"), "bool"),
        (_frame({"tensors": [_entry(shape=[0, 2**62, 2**62], length=0)]}), "tensor 't'"),
    ],
)
def test_malformed_frames_raise_transport_error(frame: bytes, reason: str) -> None:
    with pytest.raises(TransportError, match=reason):
        decode(frame)


def test_decoded_size_is_bounded_before_decompressing() -> None:
    frame = encode({"z": np.zeros(1 << 20, dtype=np.uint8)})
    assert len(frame) < 10_000
    with pytest.raises(TransportError, match="limit"):
        decode(frame, max_decoded_bytes=1 << 19)
    lie = _frame({"tensors": [_entry(shape=[2**40], codec="lz4", length=1)]}, b"\x00")
    with pytest.raises(TransportError, match="limit"):
        decode(lie)


def test_a_pickle_is_never_unpickled() -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (pytest.fail, ("unpickled!",))

    blob = pickle.dumps({"x": Boom()})
    with pytest.raises(TransportError):
        decode(blob)
    with pytest.raises(TransportError):
        decode(_frame({"tensors": [_entry(dtype="object", length=len(blob))]}, blob))
    assert issubclass(TransportError, EdgewiseError)


@pytest.mark.parametrize(
    "bad",
    [{"x": [1.0, 2.0]}, {"x": np.array(["a"])}, {"x": np.zeros(2, np.complex64)},
     {"x": torch.zeros(2, dtype=torch.complex64)}, {"x": np.zeros(2, np.uint16)},
     {"": np.zeros(2)}, {"x": torch.zeros(2, 2).to_sparse()}],
)  # fmt: skip
def test_encode_rejects_what_cannot_travel(bad: dict[str, Any]) -> None:
    with pytest.raises(TransportError):
        encode(bad)


@pytest.mark.parametrize(
    "meta", [{"x": object()}, {"x": float("nan")}, {1: 2}, {"big": "x" * (1 << 20)}]
)
def test_encode_rejects_bad_meta(meta: dict[Any, Any]) -> None:
    with pytest.raises(TransportError):
        encode({"a": np.zeros(1)}, meta=meta)
    with pytest.raises(TransportError):
        encode({"a": np.zeros(1)}, compression="gzip")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_raise_only_transport_error(data: bytes) -> None:
    for frame in (data, PRELUDE.pack(MAGIC, VERSION, 0, len(data)) + data):
        with contextlib.suppress(TransportError):
            decode(frame)


VALID = encode(
    {"a": np.arange(10, dtype=np.float32), "b": np.zeros(300, dtype=np.int16),
     "c": torch.ones(3, dtype=torch.bfloat16), "d": np.array([True, False])},
    meta={"k": 1},
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, len(VALID) - 1), flips=st.lists(
    st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=4))  # fmt: skip
def test_truncated_or_corrupted_frames_raise_only_transport_error(
    cut: int, flips: list[tuple[int, int]]
) -> None:
    with pytest.raises(TransportError):
        decode(VALID[:cut])
    corrupted = bytearray(VALID)
    for at, value in flips:
        corrupted[at] = value
    with contextlib.suppress(TransportError):
        decode(corrupted)


class _FakeClock:
    """``time.perf_counter`` that advances ``step_s`` at every call."""

    def __init__(self, step_s: float) -> None:
        self.now, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


def test_compression_throughput_is_bytes_over_the_median_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(microbench.time, "perf_counter", _FakeClock(0.25))
    # each compression spans one clock step: 2 MB in 0.25 s
    assert lz4_compress_mb_s(size_mb=2.0, repeats=3) == pytest.approx(8.0)


def test_a_round_trip_includes_the_carrier_and_checks_the_tensor() -> None:
    echoed: list[int] = []

    def slow_echo(frame: bytes) -> bytes:
        echoed.append(len(frame))
        time.sleep(0.02)  # a carrier that takes at least 20 ms each way and back
        return bytes(frame)

    assert roundtrip_via(slow_echo, repeats=3) >= 20.0
    assert len(echoed) == 3 and min(echoed) > 0

    def corrupting_echo(frame: bytes) -> bytes:
        out = bytearray(frame)
        out[-1] ^= 0xFF
        return bytes(out)

    with pytest.raises(TransportError):
        roundtrip_via(corrupting_echo, repeats=1)
    assert transport_roundtrip_ms_1mb(repeats=2) > 0
