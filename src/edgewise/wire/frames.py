"""The wire format: tensors as raw buffers behind a small JSON header, LZ4, never pickle."""

from __future__ import annotations

import json
import math
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeGuard

import lz4.block
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch

from edgewise.errors import ConfigError, EdgewiseError

__all__ = [
    "DEFAULT_MAX_DECODED_BYTES", "DTYPES", "MAGIC", "MAX_HEADER_BYTES", "VERSION", "WIRE_CHOICES",
    "WIRE_DTYPES", "Array", "Codec", "Decoded", "TensorLike", "TransportError", "WireChoice",
    "WireDtype", "decode", "encode", "raw_nbytes", "resolve_wire", "to_torch", "wire_dtype_named",
]  # fmt: skip

MAGIC: Final = b"EWTF"
VERSION: Final = 1
MAX_HEADER_BYTES: Final = 1 << 20
DEFAULT_MAX_DECODED_BYTES: Final = 1 << 30
_PRELUDE: Final = struct.Struct("<4sHHI")  # magic, version, flags (0), header length
_ALIGN: Final = 8
_MAX_NDIM: Final = 32
_MAX_NAME: Final = 1024
_LZ4_MAX_INPUT: Final = 0x7E000000  # LZ4_MAX_INPUT_SIZE of lz4.block

#: Wire dtype name -> little-endian numpy storage dtype (bfloat16 travels as raw 2 bytes).
DTYPES: Final[Mapping[str, np.dtype[Any]]] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype("<u2"),
    "float64": np.dtype("<f8"),
    "int64": np.dtype("<i8"),
    "int32": np.dtype("<i4"),
    "int16": np.dtype("<i2"),
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
    "bool": np.dtype("?"),
}
_NUMPY_NAMES: Final = {(d.kind, d.itemsize): n for n, d in DTYPES.items() if n != "bfloat16"}


@cache
def _torch_names() -> dict[Any, str]:
    import torch

    return {
        torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
        torch.float64: "float64", torch.int64: "int64", torch.int32: "int32",
        torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
    }  # fmt: skip


def _is_tensor(value: object) -> TypeGuard[torch.Tensor]:
    """Whether ``value`` is a torch tensor. A process that never imported torch holds none,
    so this module does not import it: the data store and other numpy-only actors start
    without paying torch's import (a second of a small device's CPU)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


Codec = Literal["lz4", "none"]
#: What float32 weights or gradients may travel as (runtime.trainstate, runtime.narrowing).
WireDtype = Literal["float32", "bfloat16", "float16", "int8"]
WIRE_DTYPES: Final[tuple[WireDtype, ...]] = ("float32", "bfloat16", "float16", "int8")
#: What a user may ask for: a wire dtype, or ``auto`` (:func:`resolve_wire`).
WireChoice = Literal["auto", "float32", "bfloat16", "float16", "int8"]
WIRE_CHOICES: Final[tuple[WireChoice, ...]] = ("auto", *WIRE_DTYPES)


def wire_dtype_named(value: str, field: str) -> WireChoice:
    """``value`` as a :data:`WireChoice`; ConfigError naming ``field`` (the flag or setting
    the user wrote it in) if it is none."""
    for known in WIRE_CHOICES:
        if value == known:
            return known
    raise ConfigError(f"must be one of {', '.join(WIRE_CHOICES)}, got {value!r}", field=field)


def resolve_wire(choice: WireChoice, synchronous: bool) -> WireDtype:
    """The wire dtype ``choice`` stands for: ``auto`` is ``bfloat16`` for a synchronous
    loop, whose replies are rounded changes with error feedback both ways
    (``runtime.syncdelta``), and ``float32`` for an asynchronous one, whose replies would
    be rounded weights (docs/runtime.md, "Half precision on the wire")."""
    if choice == "auto":
        return "bfloat16" if synchronous else "float32"
    return choice


TensorLike: TypeAlias = "torch.Tensor | npt.NDArray[Any] | np.generic"
Array = npt.NDArray[Any]


class TransportError(EdgewiseError):
    """A frame could not be encoded or is malformed, too large or not allowed."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """The content of one frame: numpy arrays by name, their wire dtypes and the meta dict.

    Arrays of uncompressed tensors are zero-copy views of the frame (read-only when the
    frame is ``bytes``); ``bfloat16`` arrays hold the raw 2-byte values as ``uint16``.
    """

    arrays: dict[str, Array]
    dtypes: dict[str, str]
    meta: dict[str, Any] = field(default_factory=dict)


def _as_array(value: TensorLike) -> tuple[str, Array]:
    """The wire dtype name and a C-contiguous little-endian array holding ``value``."""
    if _is_tensor(value):
        import torch

        if value.layout != torch.strided:
            raise TransportError(f"only dense tensors can travel, got layout {value.layout}")
        tensor = value.detach().cpu().resolve_conj().resolve_neg().contiguous()
        name = _torch_names().get(tensor.dtype)
        if name is None:
            raise TransportError(f"dtype {tensor.dtype} is not allowed on the wire")
        if name == "bfloat16":
            return name, tensor.view(torch.int16).numpy().view(DTYPES[name])
        return name, tensor.numpy()
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise TransportError(f"expected a torch tensor or numpy array, got {type(value)}")
    found = _NUMPY_NAMES.get((value.dtype.kind, value.dtype.itemsize))
    if found is None:
        raise TransportError(f"dtype {value.dtype} is not allowed on the wire")
    array = value.astype(DTYPES[found], copy=False)
    return found, array if array.flags.c_contiguous else array.copy(order="C")


def raw_nbytes(tensors: Mapping[str, TensorLike]) -> int:
    """Bytes the tensors occupy uncompressed (what a frame carries before LZ4)."""
    return sum(
        t.numel() * t.element_size() if _is_tensor(t) else np.asarray(t).nbytes
        for t in tensors.values()
    )


def _pad(size: int) -> int:
    return -size % _ALIGN


def _pack(name: str, value: TensorLike, compression: Codec) -> tuple[dict[str, Any], Any]:
    """The header entry (without offset and length) and the payload bytes of one tensor."""
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME:
        raise TransportError(f"tensor name must be a non-empty str, got {name!r}")
    dtype, array = _as_array(value)
    data: Any = array.reshape(-1).view(np.uint8)
    codec = "none"
    if compression == "lz4" and 0 < array.nbytes <= _LZ4_MAX_INPUT:
        packed: bytes = lz4.block.compress(data, store_size=False)
        # Float noise barely compresses; keep it raw so decode stays zero-copy.
        if len(packed) < array.nbytes:
            data, codec = packed, "lz4"
    return {"name": name, "dtype": dtype, "shape": list(array.shape), "codec": codec}, data


def encode(
    tensors: Mapping[str, TensorLike],
    *,
    compression: Codec = "lz4",
    meta: Mapping[str, Any] | None = None,
) -> bytes:
    """Encode named tensors (torch or numpy) and an optional JSON-able ``meta`` into a frame.

    Parameters
    ----------
    tensors : Mapping[str, TensorLike]
        Tensors by name; any layout in memory, dtypes from :data:`DTYPES`.
    compression : {"lz4", "none"}
        LZ4 block compression per tensor, kept only where it makes the tensor smaller.
    meta : Mapping[str, Any] or None
        A small JSON-serialisable dict carried in the header.

    Returns
    -------
    bytes
        The frame; see ``docs/transport.md`` for its layout.

    Raises
    ------
    TransportError
        A dtype, name or meta that cannot travel, or a header over 1 MiB.
    """
    if compression not in ("lz4", "none"):
        raise TransportError(f"unknown compression {compression!r}; use 'lz4' or 'none'")
    entries: list[dict[str, Any]] = []
    chunks: list[Any] = []
    offset = 0
    for name, value in tensors.items():
        entry, data = _pack(name, value, compression)
        padding = _pad(offset)
        chunks += [bytes(padding), data]
        offset += padding
        entries.append(entry | {"offset": offset, "length": len(data)})
        offset += len(data)
    header = _header_bytes(entries, meta)
    return b"".join([_PRELUDE.pack(MAGIC, VERSION, 0, len(header)), header, *chunks])


def _header_bytes(entries: list[dict[str, Any]], meta: Mapping[str, Any] | None) -> bytes:
    """The JSON header, space-padded so that the payload starts 8-byte aligned."""
    if meta is not None and not all(isinstance(k, str) for k in meta):
        raise TransportError("meta must be a mapping with str keys")
    try:
        text = json.dumps({"tensors": entries, "meta": dict(meta or {})}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TransportError(f"meta is not JSON-serialisable: {exc}") from exc
    header = text.encode()
    header += b" " * _pad(_PRELUDE.size + len(header))
    if len(header) > MAX_HEADER_BYTES:
        raise TransportError(f"header of {len(header)} bytes exceeds {MAX_HEADER_BYTES}")
    return header


def _parse_header(view: memoryview) -> tuple[dict[str, Any], int]:
    """The parsed JSON header and the offset of the payload in the frame."""
    if len(view) < _PRELUDE.size:
        raise TransportError(f"frame of {len(view)} bytes is shorter than its prelude")
    magic, version, flags, length = _PRELUDE.unpack_from(view)
    if magic != MAGIC:
        raise TransportError(f"bad magic {bytes(magic)!r}; not an edgewise frame")
    if version != VERSION or flags != 0:
        raise TransportError(f"unsupported frame version {version} (flags {flags})")
    if length > MAX_HEADER_BYTES or _PRELUDE.size + length > len(view):
        raise TransportError(f"header length {length} is too long or truncated")
    try:
        header = json.loads(bytes(view[_PRELUDE.size : _PRELUDE.size + length]))
    except (ValueError, RecursionError) as exc:
        raise TransportError(f"header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise TransportError("header must be an object with a 'tensors' list")
    if not isinstance(header.get("meta", {}), dict):
        raise TransportError("header 'meta' must be an object")
    return header, _PRELUDE.size + length


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _check_entry(entry: object, expected_offset: int, seen: set[str]) -> int:
    """Validate one tensor entry; returns its decoded size in bytes."""
    if not isinstance(entry, dict):
        raise TransportError("tensor entry must be an object")
    name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME or name in seen:
        raise TransportError(f"tensor name {name!r} is missing, too long or repeated")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise TransportError(f"tensor {name!r}: dtype {dtype!r} is not allowed")
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(map(_is_count, shape)):
        raise TransportError(f"tensor {name!r}: bad shape {shape!r}")
    if entry.get("codec") not in ("none", "lz4"):
        raise TransportError(f"tensor {name!r}: unknown codec {entry.get('codec')!r}")
    offset, length = entry.get("offset"), entry.get("length")
    if not _is_count(offset) or offset != expected_offset or not _is_count(length):
        raise TransportError(f"tensor {name!r}: bad offset or length")
    nbytes = math.prod(shape) * DTYPES[dtype].itemsize
    if entry["codec"] == "none" and entry["length"] != nbytes:
        raise TransportError(f"tensor {name!r}: {entry['length']} bytes, shape needs {nbytes}")
    seen.add(name)
    return nbytes


def _load_array(chunk: memoryview, entry: dict[str, Any], nbytes: int) -> Array:
    """The array of one validated entry: a view of ``chunk`` or its LZ4 decompression."""
    data: Any = chunk
    if entry["codec"] == "lz4":
        try:
            data = lz4.block.decompress(chunk, uncompressed_size=nbytes)
        except Exception as exc:  # lz4 raises its own LZ4BlockError, not exported
            raise TransportError(f"tensor {entry['name']!r}: bad LZ4 data: {exc}") from exc
        if len(data) != nbytes:
            raise TransportError(f"tensor {entry['name']!r}: decompressed size mismatch")
    dtype = DTYPES[entry["dtype"]]
    try:
        array = np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize)
        array = array.reshape(entry["shape"])
    except (ValueError, TypeError, OverflowError) as exc:
        raise TransportError(f"tensor {entry['name']!r}: {exc}") from exc
    if entry["dtype"] == "bool" and array.size and array.view(np.uint8).max() > 1:
        raise TransportError(f"tensor {entry['name']!r}: bool bytes other than 0 and 1")
    return array


def decode(
    frame: bytes | bytearray | memoryview, *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
) -> Decoded:
    """Decode and validate a frame made by :func:`encode`; never unpickles anything.

    Raises
    ------
    TransportError
        Bad magic or version, an oversized or invalid header, a dtype not allowed, sizes
        that do not match the shape, a truncated payload, or more than
        ``max_decoded_bytes`` once decompressed.
    """
    try:
        view = memoryview(frame).cast("B")
    except TypeError as exc:
        raise TransportError(f"frame is not a contiguous byte buffer: {exc}") from exc
    header, start = _parse_header(view)
    payload = view[start:]
    entries: list[tuple[dict[str, Any], int]] = []
    seen: set[str] = set()
    end = total = 0
    for entry in header["tensors"]:
        nbytes = _check_entry(entry, end + _pad(end), seen)
        end = entry["offset"] + entry["length"]
        total += nbytes
        entries.append((entry, nbytes))
    if end != len(payload):
        raise TransportError(f"payload is {len(payload)} bytes, header describes {end}")
    if total > max_decoded_bytes:
        raise TransportError(f"frame decodes to {total} bytes, limit {max_decoded_bytes}")
    arrays = {
        e["name"]: _load_array(payload[e["offset"] : e["offset"] + e["length"]], e, n)
        for e, n in entries
    }
    return Decoded(arrays, {e["name"]: e["dtype"] for e, _ in entries}, header.get("meta", {}))


def to_torch(decoded: Decoded) -> dict[str, torch.Tensor]:
    """Writable torch tensors (copies) of a decoded frame, ``bfloat16`` restored."""
    import torch

    out: dict[str, torch.Tensor] = {}
    for name, array in decoded.arrays.items():
        if decoded.dtypes[name] == "bfloat16":
            out[name] = torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
        else:
            out[name] = torch.from_numpy(array.copy())
    return out
