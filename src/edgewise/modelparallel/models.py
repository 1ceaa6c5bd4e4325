"""SROLE's three training models (§V-A) sized for their data sets: VGG-16 and a GoogLeNet
(Inception v1) for MNIST padded to 32×32, and a stacked-LSTM regressor for Air Quality."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.zoo import VGG16

__all__ = ["GoogLeNet", "LSTMRegressor", "build_srole_model", "mnist_vgg16", "srole_models"]


def mnist_vgg16(n_classes: int = 10) -> VGG16:
    """The zoo's VGG-16 as the Keras MNIST examples build it: 32×32 input, the five pooled
    blocks leave 512×1×1, flattened into 4096-4096-``n_classes`` dense layers (33.6 M params)."""
    model = VGG16(n_classes)
    model.avgpool = nn.AdaptiveAvgPool2d(1)
    model.classifier[0] = nn.Linear(512, 4096)
    return model


def _conv(c_in: int, c_out: int, k: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, padding=k // 2), nn.ReLU(inplace=True))


class _Inception(nn.Module):
    """An Inception-v1 module: 1×1, 1×1→3×3, 1×1→5×5 and pool→1×1 branches, concatenated."""

    def __init__(self, c_in: int, c1: int, r3: int, c3: int, r5: int, c5: int, cp: int) -> None:
        super().__init__()
        self.b1 = _conv(c_in, c1, 1)
        self.b3 = nn.Sequential(_conv(c_in, r3, 1), _conv(r3, c3, 3))
        self.b5 = nn.Sequential(_conv(c_in, r5, 1), _conv(r5, c5, 5))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), _conv(c_in, cp, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)


# Szegedy et al. 2015, Table 1: (#1×1, #3×3 reduce, #3×3, #5×5 reduce, #5×5, pool proj)
_GOOGLENET = {"3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
              "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
              "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
              "4e": (256, 160, 320, 32, 128, 128), "5a": (256, 160, 320, 32, 128, 128),
              "5b": (384, 192, 384, 48, 128, 128)}


class GoogLeNet(nn.Module):
    """GoogLeNet (Inception v1) with its nine Inception modules, a stem for 32×32 single-
    channel input (one 3×3 convolution, as CIFAR/MNIST ports do) and no auxiliary heads."""

    def __init__(self, n_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv(in_channels, 192, 3))
        blocks: list[nn.Module] = []
        width = 192
        for name, cfg in _GOOGLENET.items():
            if name in ("4a", "5a"):
                blocks.append(nn.MaxPool2d(3, 2, padding=1))
            blocks.append(_Inception(width, *cfg))
            width = cfg[0] + cfg[2] + cfg[4] + cfg[5]
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))
        return out


class _LSTMLayer(nn.Module):
    """One LSTM layer unrolled over time (so graph analysis counts its FLOPs per step)."""

    def __init__(self, n_in: int, hidden: int, steps: int) -> None:
        super().__init__()
        self.gates_x = nn.Linear(n_in, 4 * hidden)
        self.gates_h = nn.Linear(hidden, 4 * hidden, bias=False)
        self.hidden, self.steps = hidden, steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], self.hidden)
        c = x.new_zeros(x.shape[0], self.hidden)
        outs = []
        gx = self.gates_x(x)
        for t in range(self.steps):
            i, f, g, o = (gx[:, t] + self.gates_h(h)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs, dim=1)


class LSTMRegressor(nn.Module):
    """The RNN of [47] for Air Quality: stacked LSTM layers of ``hidden`` units over a window
    of ``steps`` hourly readings of ``n_features`` sensors, a dense head predicting the AQI."""

    def __init__(self, n_features: int = 13, hidden: int = 100, n_layers: int = 3,
                 steps: int = 24) -> None:
        super().__init__()
        sizes = [n_features] + [hidden] * n_layers
        self.layers = nn.Sequential(*(_LSTMLayer(a, hidden, steps)
                                      for a in sizes[:-1]))
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.layers(x)[:, -1])
        return out


_MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "vgg-16": lambda: (mnist_vgg16(), torch.randn(1, 3, 32, 32)),
    "googlenet": lambda: (GoogLeNet(), torch.randn(1, 1, 32, 32)),
    "rnn": lambda: (LSTMRegressor(), torch.randn(1, 24, 13)),
}


def srole_models() -> list[str]:
    """The names `build_srole_model` accepts: SROLE's three models (§V-A)."""
    return list(_MODELS)


def build_srole_model(name: str) -> tuple[nn.Module, torch.Tensor]:
    """One of SROLE's models in eval mode and a batch-1 example input.

    Raises
    ------
    ConfigError
        If ``name`` is not one of `srole_models`.
    """
    if name not in _MODELS:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(_MODELS)}", field="model")
    model, example = _MODELS[name]()
    return model.eval(), example
