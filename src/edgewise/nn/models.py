"""Small trainable models for the runtime and the benchmarks."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.eager_optim import EagerAdam, EagerSGD

__all__ = [
    "MODELS",
    "NO_WARMUP",
    "OPTIMIZERS",
    "DigitsCNN",
    "Warmup",
    "build_model",
    "epoch_lr",
    "make_optimizer",
]


class DigitsCNN(nn.Module):
    """A small CNN for 8x8 digits: two 3x3 convolutions, a max-pool and two dense layers
    (about 38k parameters, 150 KB in float32)."""

    def __init__(self, n_classes: int = 10, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(2 * width * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


MODELS = {"digits-cnn": DigitsCNN}


def build_model(name: str, seed: int = 0) -> nn.Module:
    """A freshly initialised model by name, its weights fixed by ``seed``."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(MODELS)}", field="model")
    torch.manual_seed(seed)
    return MODELS[name]()


OPTIMIZERS = ("adam", "sgd")


def make_optimizer(
    name: str, model: nn.Module | Iterable[nn.Parameter], lr: float, momentum: float = 0.0
) -> torch.optim.Optimizer:
    """The parameter server's optimiser over a model's parameters (or the given ones). Adam
    is the default: with asynchronous workers the gradients are stale, and stale gradients
    with heavy SGD momentum oscillate.

    PyTorch's fused implementation where every parameter is a floating-point tensor on the
    CPU (the same update in one kernel call instead of one per operation: a step of the
    digits CNN's flat parameters took 0.08 ms instead of 0.13 on this host, and the parameter
    server steps once per push). Without the TorchDynamo import that PyTorch's optimisers
    make on first use (0.8 CPU-seconds of every fresh worker process: ``nn.eager_optim``)."""
    params = list(model.parameters() if isinstance(model, nn.Module) else model)
    fused = bool(params) and all(p.device.type == "cpu" and p.is_floating_point()
                                 for p in params)
    if name == "adam":
        return EagerAdam(params, lr=lr, fused=fused)
    if name == "sgd":
        return EagerSGD(params, lr=lr, momentum=momentum, fused=fused)
    raise ConfigError(f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}",
                      field="optimizer")


@dataclass(frozen=True, slots=True)
class Warmup:
    """Gradual warm-up (Goyal et al., "Accurate, large minibatch SGD", 2017): the rate starts
    at ``start_factor`` of the schedule's and grows linearly to all of it over ``epochs``
    (fractional allowed). An epoch takes the ramp's value at its middle, the mean of a ramp
    taken step by step. No epochs: no warm-up."""

    epochs: float = 0.0
    start_factor: float = 1.0

    def factor(self, epoch: int) -> float:
        """The share of the schedule's rate that ``epoch`` (0-based) trains at."""
        if self.epochs <= 0 or epoch < 0:
            return 1.0
        done = min(1.0, (epoch + 0.5) / self.epochs)
        return self.start_factor + (1.0 - self.start_factor) * done


NO_WARMUP = Warmup()


def epoch_lr(base: float, schedule: str, epoch: int, epochs: int,
             warmup: Warmup = NO_WARMUP) -> float:
    """The learning rate of ``epoch`` (0-based) of ``epochs``: constant, or cosine-annealed
    from ``base`` towards zero (half a cosine over the run, Loshchilov & Hutter's SGDR);
    times ``warmup``'s factor."""
    if schedule == "cosine" and epoch >= 0:
        base = base * 0.5 * (1 + math.cos(math.pi * min(epoch, epochs) / epochs))
    return base * warmup.factor(epoch)
