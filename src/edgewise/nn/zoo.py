"""Real architectures without weights, for graph analysis: VGG-16 written here, the rest
instantiated from Hugging Face ``transformers`` config classes with random initialisation.

Every model is built in eval mode with a batch-1 example at its standard resolution (224×224,
240×240 for EfficientNet-B1) or a 128-token sequence. ``nasnet-toy`` is not a real
architecture: a small stack of NASNet-like cells that has no candidate partition point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.graph import candidate_points, layer_dag, to_chain

__all__ = ["VGG16", "NasNetToy", "build", "chain", "zoo_names"]

Example = torch.Tensor | dict[str, torch.Tensor]

_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
          512, 512, 512, "M")


class VGG16(nn.Module):
    """VGG-16 (configuration D of Simonyan & Zisserman): 13 3×3 convolutions in five pooled
    blocks and three dense layers, 138.4 M parameters at 1000 classes."""

    def __init__(self, n_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = 3
        for v in _VGG16:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(width, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                width = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))
        return out


class _Cell(nn.Module):
    """Two branches of different depth, one fed by each of the two previous cells, added."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.right = nn.Sequential(nn.Conv2d(width, width, 1), nn.ReLU(),
                                   nn.Conv2d(width, width, 3, padding=1), nn.ReLU())

    def forward(self, prev: torch.Tensor, prev2: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.left(prev) + self.right(prev2)
        return out


class NasNetToy(nn.Module):
    """A stem and a stack of NASNet-like cells, each reading the two previous cells' outputs
    (so no single vertex separates input from output), then a classifier reading the last two."""

    def __init__(self, width: int = 16, n_cells: int = 6, n_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.cells = nn.ModuleList(_Cell(width) for _ in range(n_cells))
        self.head = nn.Linear(width, n_classes)
        self.head2 = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prev2 = x.mean(dim=1, keepdim=True).expand(-1, self.stem.out_channels, -1, -1)
        prev = self.stem(x)
        for cell in self.cells:
            prev, prev2 = cell(prev, prev2), prev
        out: torch.Tensor = self.head(prev.mean(dim=(2, 3))) + self.head2(prev2.mean(dim=(2, 3)))
        return out


def _hf(model_cls: str, config_cls: str, example: Callable[[], torch.Tensor],
        **config: Any) -> Callable[[], tuple[nn.Module, Example]]:
    """A builder for a transformers model from its config class (random weights)."""

    def make() -> tuple[nn.Module, Example]:
        try:
            import transformers
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise ConfigError("the zoo's Hugging Face models need `transformers`",
                              field="model") from exc
        cfg = getattr(transformers, config_cls)(**config)
        model = getattr(transformers, model_cls)(cfg).eval()
        return model, {model.main_input_name: example()}

    return make


def _image(size: int = 224) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(1, 3, size, size)


def _tokens(n: int = 128) -> Callable[[], torch.Tensor]:
    return lambda: torch.randint(0, 1000, (1, n))


def _local(cls: type[nn.Module], size: int) -> Callable[[], tuple[nn.Module, Example]]:
    return lambda: (cls().eval(), torch.randn(1, 3, size, size))


_EFFNET = {"dropout_rate": 0.2, "hidden_dim": 1280, "num_labels": 1000}
_ZOO: dict[str, Callable[[], tuple[nn.Module, Example]]] = {
    "vgg-16": _local(VGG16, 224),
    "resnet-50": _hf("ResNetForImageClassification", "ResNetConfig", _image(), num_labels=1000),
    "mobilenet-v1": _hf("MobileNetV1ForImageClassification", "MobileNetV1Config", _image(),
                        num_labels=1001),
    "mobilenet-v2": _hf("MobileNetV2ForImageClassification", "MobileNetV2Config", _image(),
                        num_labels=1001),
    "efficientnet-b0": _hf("EfficientNetForImageClassification", "EfficientNetConfig",
                           _image(224), width_coefficient=1.0, depth_coefficient=1.0,
                           image_size=224, **_EFFNET),
    "efficientnet-b1": _hf("EfficientNetForImageClassification", "EfficientNetConfig",
                           _image(240), width_coefficient=1.0, depth_coefficient=1.1,
                           image_size=240, **_EFFNET),
    "vit-base": _hf("ViTForImageClassification", "ViTConfig", _image(), num_labels=1000),
    "convnext-tiny": _hf("ConvNextForImageClassification", "ConvNextConfig", _image(),
                         num_labels=1000),
    "swin-tiny": _hf("SwinForImageClassification", "SwinConfig", _image(), num_labels=1000),
    "bert-base": _hf("BertForSequenceClassification", "BertConfig", _tokens()),
    "distilbert-base": _hf("DistilBertForSequenceClassification", "DistilBertConfig",
                           _tokens()),
    "gpt2": _hf("GPT2LMHeadModel", "GPT2Config", _tokens(), use_cache=False),
    "nasnet-toy": _local(NasNetToy, 32),
}


def zoo_names() -> list[str]:
    """The names `build` and `chain` accept, in a fixed order."""
    return list(_ZOO)


def build(name: str) -> tuple[nn.Module, Example]:
    """A model in eval mode, randomly initialised, and a batch-1 example input for it.

    Raises
    ------
    ConfigError
        If ``name`` is not in the zoo (the message lists the zoo).
    """
    if name not in _ZOO:
        raise ConfigError(f"unknown model {name!r}; the zoo has: {', '.join(_ZOO)}",
                          field="model")
    return _ZOO[name]()


def chain(name: str, dtype_bytes: int = 4) -> ModelChain:
    """The zoo model's chain over all its candidate partition points (SEIFER §3.1)."""
    model, example = build(name)
    dag = layer_dag(model, example, dtype_bytes)
    return to_chain(name, dag, candidate_points(dag))
