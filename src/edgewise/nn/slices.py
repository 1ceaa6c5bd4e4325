"""Models too big for one process: built with parameters on ``meta`` (no memory), weights
in sharded safetensors files written one shard at a time, and stages that load only their
own tensors by name (the layout of Hugging Face's sharded checkpoints: an index JSON whose
``weight_map`` names each tensor's file)."""

from __future__ import annotations

import contextlib
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from edgewise.errors import ConfigError
from edgewise.wire.frames import decode, encode, to_torch

__all__ = ["INDEX_NAME", "SliceWeights", "empty_parameters", "load_slice", "load_whole",
           "slice_payload", "state_bytes", "write_seeded_weights"]

INDEX_NAME = "model.safetensors.index.json"
_INIT_STD = 0.02  # transformers' initializer_range for ViT and BERT


@contextlib.contextmanager
def empty_parameters() -> Iterator[None]:
    """Modules built inside put every parameter on ``meta`` (no storage); buffers stay
    real, so constants computed from them at tracing are real too."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None:
            module._parameters[name] = nn.Parameter(param.to("meta"),
                                                    requires_grad=param.requires_grad)

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]


def _seeded(name: str, like: torch.Tensor, norm: bool, seed: int) -> torch.Tensor:
    """The tensor ``name`` drawn from ``seed`` and its name alone (order-free): biases 0,
    LayerNorm weights 1, everything else N(0, 0.02²), as transformers initialises."""
    if name.endswith("bias"):
        return torch.zeros(like.shape, dtype=like.dtype)
    if norm:
        return torch.ones(like.shape, dtype=like.dtype)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return torch.randn(like.shape, generator=gen, dtype=like.dtype) * _INIT_STD


def write_seeded_weights(model: nn.Module, directory: Path, seed: int,
                         shard_bytes: int = 256 * 2**20,
                         metadata: Mapping[str, Any] | None = None) -> Path:
    """Write ``model``'s state dict (parameters drawn by :func:`_seeded`, real buffers as
    they are) to ``directory`` as safetensors shards of about ``shard_bytes`` and an index
    (with ``metadata``, default the seed); at most one shard is in memory at a time.
    Returns the index's path."""
    directory.mkdir(parents=True, exist_ok=True)
    norms = {f"{m}.weight" if m else "weight" for m, mod in model.named_modules()
             if isinstance(mod, nn.LayerNorm)}
    weight_map: dict[str, str] = {}
    shard: dict[str, torch.Tensor] = {}
    size = 0

    def flush() -> None:
        nonlocal shard, size
        if shard:
            file = f"model-{len(set(weight_map.values())):05d}.safetensors"
            save_file(shard, str(directory / file))
            weight_map.update(dict.fromkeys(shard, file))
        shard, size = {}, 0

    for name, value in model.state_dict().items():
        tensor = _seeded(name, value, name in norms, seed) if value.is_meta \
            else value.detach().clone().contiguous()
        shard[name] = tensor
        size += tensor.numel() * tensor.element_size()
        if size >= shard_bytes:
            flush()
    flush()
    index = directory / INDEX_NAME
    index.write_text(json.dumps({"metadata": dict(metadata or {"seed": seed}),
                                 "weight_map": weight_map}))
    return index


def _weight_map(index: Path) -> dict[str, str]:
    try:
        return dict(json.loads(index.read_text())["weight_map"])
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot read the weights index {index}: {exc}",
                          field="weights") from exc


def _read(index: Path, names: Mapping[str, str]) -> dict[str, torch.Tensor]:
    """``{key: tensor}`` for each ``key -> model name`` in ``names``, each file opened once
    and only the named tensors read."""
    files = _weight_map(index)
    missing = sorted(set(names.values()) - set(files))
    if missing:
        raise ConfigError(f"{index} has no tensor {missing[0]!r}", field="weights")
    by_file: dict[str, list[tuple[str, str]]] = {}
    for key, name in names.items():
        by_file.setdefault(files[name], []).append((key, name))
    out: dict[str, torch.Tensor] = {}
    for file, pairs in by_file.items():
        with safe_open(str(index.parent / file), framework="pt") as f:
            out |= {key: f.get_tensor(name) for key, name in pairs}
    return out


@dataclass(frozen=True, slots=True)
class SliceWeights:
    """What a stage needs besides its structure: the index of the model's shards, for each
    of its tensors that is the model's (parameters, persistent buffers) the model's name,
    and its own constants (folded at tracing, non-persistent buffers) as one frame."""

    index: str
    sources: tuple[tuple[str, str], ...]
    local: bytes


def _tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer (non-persistent ones too) by dotted name."""
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def slice_payload(stage: nn.Module, index: Path, sources: Mapping[str, str]
                  ) -> tuple[nn.Module, SliceWeights]:
    """The stage's structure with every tensor on ``meta``, and where its tensors come from.
    ``sources`` maps the stage's tensor names to the model's (see
    :meth:`~edgewise.nn.partition.PartitionedModel.stage_with_sources`)."""
    local = {k: v for k, v in _tensors(stage).items() if k not in sources}
    held = [k for k, v in local.items() if v.is_meta]
    if held:
        raise ConfigError(f"the stage's tensor {held[0]!r} is neither the model's nor real",
                          field="weights")
    ref = SliceWeights(str(index), tuple(sorted(sources.items())), encode(local))
    return stage.to("meta"), ref


def _assign(module: nn.Module, name: str, value: torch.Tensor) -> None:
    owner_name, _, attr = name.rpartition(".")
    owner = module.get_submodule(owner_name)
    if attr in owner._parameters:
        owner._parameters[attr] = nn.Parameter(value, requires_grad=False)
    else:
        owner._buffers[attr] = value


def load_slice(skeleton: nn.Module, ref: SliceWeights) -> nn.Module:
    """``skeleton`` (every tensor on ``meta``) with its own tensors read from the shards by
    name and its constants from ``ref.local``, in eval mode; nothing else is read.
    ConfigError names a tensor that is missing or whose shape differs."""
    sources = dict(ref.sources)
    tensors = _read(Path(ref.index), sources) | to_torch(decode(ref.local))
    for key, want in _tensors(skeleton).items():
        if key not in tensors and not want.is_meta:
            continue  # a constant the graph module made itself when it was re-traced
        if key not in tensors:
            raise ConfigError(f"the stage's tensor {key!r} is in no weights file",
                              field="weights")
        if tuple(tensors[key].shape) != tuple(want.shape):
            raise ConfigError(f"weight {sources.get(key, key)!r} has shape "
                              f"{tuple(tensors[key].shape)}, the model needs "
                              f"{tuple(want.shape)}", field="weights")
        _assign(skeleton, key, tensors[key])
    return skeleton.eval()


def load_whole(model: nn.Module, index: Path) -> nn.Module:
    """Every tensor of ``model``'s state dict read from the shards (strict): the reference
    model, evaluated off the devices."""
    names = {k: k for k in model.state_dict()}
    model.load_state_dict(_read(index, names), strict=True, assign=True)
    return model.eval()


def state_bytes(module: nn.Module) -> int:
    """Bytes of the module's parameters and buffers (meta ones counted by shape)."""
    return sum(t.numel() * t.element_size() for t in module.state_dict().values())
