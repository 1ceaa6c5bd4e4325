"""Large transformers as pipeline workloads (PipeEdge's models): ViT-Large, ViT-Huge and
BERT-Large from transformers' configs with seeded random weights, built with parameters on
``meta``, traced there for their cut points, and served stage by stage from safetensors
shards, so that no process holds the whole model."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.partition import PartitionedModel, partition_model
from edgewise.nn.slices import (
    INDEX_NAME,
    SliceWeights,
    empty_parameters,
    load_whole,
    slice_payload,
    write_seeded_weights,
)
from edgewise.nn.workload.modelbuild import Logits

__all__ = ["LARGE", "LargeModel", "LargeSpec", "large_spec", "model_builder", "prepare"]


@dataclass(frozen=True, slots=True)
class LargeSpec:
    """A transformers model class with its config: images of ``image_size`` (3 channels)
    or ``seq_len`` token ids below ``vocab_size``."""

    name: str
    model_class: str
    config_class: str
    config: tuple[tuple[str, Any], ...]

    def kwargs(self) -> dict[str, Any]:
        return dict(self.config)

    @property
    def is_text(self) -> bool:
        return "vocab_size" in self.kwargs()

    def example(self, batch: int = 1) -> torch.Tensor:
        """A request of ``batch`` inputs (a micro-batch): images, or token ids."""
        cfg = self.kwargs()
        if self.is_text:
            return torch.randint(0, int(cfg["vocab_size"]), (batch, int(cfg["seq_len"])))
        size = int(cfg["image_size"])
        return torch.zeros(batch, int(cfg.get("num_channels", 3)), size, size)


_VIT = {"image_size": 224, "num_labels": 1000}
LARGE: dict[str, LargeSpec] = {
    # Dosovitskiy et al. 2021, Table 1 (the configs of google/vit-large-patch16-224, ...)
    "vit-large": LargeSpec("vit-large", "ViTForImageClassification", "ViTConfig", tuple({
        **_VIT, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
        "intermediate_size": 4096, "patch_size": 16}.items())),
    "vit-huge": LargeSpec("vit-huge", "ViTForImageClassification", "ViTConfig", tuple({
        **_VIT, "hidden_size": 1280, "num_hidden_layers": 32, "num_attention_heads": 16,
        "intermediate_size": 5120, "patch_size": 14}.items())),
    # Devlin et al. 2019 (bert-large-uncased), 128 tokens as PipeEdge's BERT runs
    "bert-large": LargeSpec("bert-large", "BertForSequenceClassification", "BertConfig", tuple({
        "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
        "intermediate_size": 4096, "vocab_size": 30522, "seq_len": 128,
        "num_labels": 2}.items())),
}


def large_spec(name: str, sibling: str = "small", **overrides: Any) -> LargeSpec:
    """The named model's spec, with config fields replaced (a small one of the same class
    for tests: ``large_spec("vit-large", hidden_size=64, num_hidden_layers=2, ...)``); a
    spec with overrides is named ``NAME-SIBLING``."""
    if name not in LARGE:
        raise ConfigError(f"unknown large model {name!r}; known: {', '.join(LARGE)}",
                          field="model")
    base = LARGE[name]
    return LargeSpec(name if not overrides else f"{name}-{sibling}", base.model_class,
                     base.config_class, tuple({**base.kwargs(), **overrides}.items()))


def model_builder(spec: LargeSpec) -> Callable[[], nn.Module]:
    """A function building ``spec``'s model (logits out, eval mode); call it inside
    :func:`~edgewise.nn.slices.empty_parameters` to hold no weights."""
    import transformers

    cfg = {k: v for k, v in spec.kwargs().items() if k != "seq_len"}
    if spec.is_text:
        cfg.setdefault("max_position_embeddings", max(512, int(spec.kwargs()["seq_len"])))
    config = getattr(transformers, spec.config_class)(**cfg)
    cls = getattr(transformers, spec.model_class)
    return lambda: Logits(cls(config)).eval()


@dataclass(frozen=True, slots=True, eq=False)
class LargeModel:
    """A large model ready to serve: its trace on ``meta`` (cut points and chain), the index
    of its weight shards and a request's shape. :meth:`payloads` gives the stages of a plan;
    :meth:`reference` builds the whole model, for checking outputs off the devices."""

    spec: LargeSpec
    partitioned: PartitionedModel
    index: Path
    example: torch.Tensor

    def payloads(self, cuts: tuple[int, ...]) -> list[tuple[nn.Module, SliceWeights]]:
        """Each partition's structure (tensors on ``meta``) and where its weights are."""
        out = []
        for a, b in pairwise(cuts):
            stage, sources = self.partitioned.stage_with_sources(a, b)
            out.append(slice_payload(stage, self.index, sources))
        return out

    def reference(self) -> nn.Module:
        """The whole model with the shards' weights (real memory: off the devices only),
        built on ``meta`` first so that no random initialisation is drawn and replaced."""
        with empty_parameters():
            model = model_builder(self.spec)()
        return load_whole(model, self.index)


def prepare(spec: LargeSpec, directory: Path, seed: int = 0, *,
            micro_batch: int = 1) -> LargeModel:
    """Build ``spec`` on ``meta``, write its seeded weights under ``directory`` (kept and
    reused when the index there says the same seed and model) and trace it for its chain
    with requests of ``micro_batch`` inputs: the chain's FLOPs and activations are a
    request's, so plans and profiles are per request."""
    if micro_batch < 1:
        raise ConfigError(f"a micro-batch holds at least 1 input, got {micro_batch}",
                          field="micro_batch")
    torch.manual_seed(seed)  # buffers and the config's own draws
    with empty_parameters():
        model = model_builder(spec)()
    index = directory / INDEX_NAME
    stamp = {"seed": seed, "model": spec.name, "config": json.dumps(spec.kwargs(),
                                                                   sort_keys=True)}
    if not index.exists() or json.loads(index.read_text()).get("metadata") != stamp:
        index = write_seeded_weights(model, directory, seed, metadata=stamp)
    example = spec.example(micro_batch)
    traced_on = example if not example.is_floating_point() else example.to("meta")
    pm = partition_model(spec.name, model, traced_on)
    return LargeModel(spec, pm, index, example)
