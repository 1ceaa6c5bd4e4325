"""Staleness of asynchronous updates, and what the parameter server does about it.

A worker computes its gradient on the weights of server version ``v`` (the number of updates
the server had applied when it sent them). When the server applies that gradient it is at
version ``u >= v``: the update's **staleness** is ``u - v``, counted in server versions (0 for
a synchronous step, about ``workers - 1`` for Deep-Edge's asynchronous loop).

The treatments (``Treatment.name``; pure functions of tensors, no Ray):

- ``none``: the paper's semantics, every gradient applied as it arrives;
- ``staleness-lr``: the step's learning rate divided by the staleness (Zhang et al.,
  "Staleness-aware Async-SGD", IJCAI 2016: ``lr / max(1, tau)``);
- ``dc-asgd``: delay compensation (Zheng et al., ICML 2017), adaptive variant:
  ``g + lambda_t * g * g * (w_now - w_then)``, ``lambda_t = lambda0 / sqrt(mean_square(g))``;
- ``gap-aware``: the gradient divided element-wise by the gap (Barkai et al., ICLR 2020):
  ``1 + |w_now - w_then| / C``, ``C`` a running mean of one step's absolute change;
- ``ssp``: bounded staleness (Ho et al., SSP, NIPS 2013): a worker more than ``bound`` clocks
  ahead of the slowest active one waits for it (the server holds its reply).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["TREATMENTS", "StalenessLedger", "Treatment", "TreatmentName", "VersionSnapshots",
           "delay_compensated", "gap_penalised", "implicit_momentum", "staleness_lr"]

TreatmentName = Literal["none", "staleness-lr", "dc-asgd", "gap-aware", "ssp"]
TREATMENTS: tuple[TreatmentName, ...] = ("none", "staleness-lr", "dc-asgd", "gap-aware", "ssp")


@dataclass(frozen=True, slots=True)
class Treatment:
    """How the server treats stale gradients. ``momentum_compensation``: lower the
    optimiser's momentum (SGD's, Adam's beta1) by the momentum that asynchrony itself adds
    (``implicit_momentum``), so the two together stay at the configured value."""

    name: TreatmentName = "none"
    ssp_bound: int = 2  # clocks a worker may run ahead of the slowest (ssp)
    dc_lambda: float = 2.0  # lambda0 of adaptive DC-ASGD
    dc_decay: float = 0.95  # the mean square's decay (DC-ASGD's m)
    gap_decay: float = 0.99  # the running mean of one step's absolute change (gap-aware's C)
    momentum_compensation: bool = True
    # > 0: a push's step is scaled by its batch over this many samples (linear rule), so a
    # sample weighs the same whichever worker's batch it was in; 0: every push alike
    batch_reference: int = 0

    def __post_init__(self) -> None:
        if self.name not in TREATMENTS:
            raise ValueError(f"unknown staleness treatment {self.name!r}; use one of "
                             f"{', '.join(TREATMENTS)}")
        if self.ssp_bound < 0:
            raise ValueError(f"ssp_bound must be >= 0, got {self.ssp_bound}")
        if self.batch_reference < 0:
            raise ValueError(f"batch_reference must be >= 0, got {self.batch_reference}")

    @property
    def needs_snapshots(self) -> bool:
        """Whether the server must keep the weights each worker computed on."""
        return self.name in ("dc-asgd", "gap-aware")


def staleness_lr(lr: float, staleness: int) -> float:
    """Zhang et al.'s staleness-aware learning rate: ``lr / max(1, staleness)``."""
    return lr / max(1, staleness)


def implicit_momentum(mean_staleness: float) -> float:
    """The momentum asynchrony adds on its own (Mitliagkas et al., "Asynchrony begets
    momentum", 2016): with updates ``tau`` versions old on average, about ``1 - 1/(1 + tau)``
    (``1 - 1/M`` for ``M`` workers, each ``M - 1`` versions behind)."""
    return 1.0 - 1.0 / (1.0 + max(mean_staleness, 0.0))


def delay_compensated(grad: torch.Tensor, now: torch.Tensor, then: torch.Tensor,
                      mean_square: torch.Tensor, lambda0: float, decay: float) -> torch.Tensor:
    """Adaptive DC-ASGD: updates ``mean_square`` in place and returns the compensated
    gradient ``g + lambda0 / sqrt(ms) * g * g * (now - then)``."""
    mean_square.mul_(decay).add_(grad * grad, alpha=1 - decay)
    lam = lambda0 / (mean_square.sqrt() + 1e-7)
    return grad + lam * grad * grad * (now - then)


def gap_penalised(grad: torch.Tensor, now: torch.Tensor, then: torch.Tensor,
                  step_size: torch.Tensor) -> torch.Tensor:
    """Gap-aware: ``grad / (1 + |now - then| / C)`` element-wise, ``C`` = ``step_size``
    (a running mean of one update's absolute change, per element)."""
    gap = 1.0 + (now - then).abs() / (step_size + 1e-12)
    return grad / gap


class StalenessLedger:
    """Counts the staleness of applied updates: ``applied(base)`` when the server, at
    version ``version``, applies a gradient computed on version ``base``."""

    def __init__(self) -> None:
        self.version = 0
        self.values: list[int] = []

    def applied(self, base: int) -> int:
        """Record one applied update computed on ``base``; the server's version advances."""
        if base > self.version:
            raise ValueError(f"an update computed on version {base} cannot reach a server "
                             f"at version {self.version}")
        tau = self.version - base
        self.values.append(tau)
        self.version += 1
        return tau

    def step(self, bases: Iterable[int]) -> int:
        """One synchronous step of pushes computed on ``bases``: one version, each push's
        staleness recorded; returns the largest."""
        taus = [self.version - b for b in bases]
        if any(t < 0 for t in taus):
            raise ValueError(f"a push is ahead of the server's version {self.version}")
        self.values.extend(taus)
        self.version += 1
        return max(taus, default=0)

    def reset(self) -> None:
        """Start a new epoch's count (the version goes on)."""
        self.values = []

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else 0.0

    @property
    def max(self) -> int:
        return max(self.values, default=0)


class VersionSnapshots:
    """The weights of each version some worker may be computing on (DC-ASGD and gap-aware
    need them): the last two handed to each worker, since an overlapping worker
    (``TrainConfig.overlap``) pushes a gradient of the version before its latest; a
    version no worker may still compute on is dropped."""

    HELD_PER_WORKER = 2

    def __init__(self) -> None:
        self.weights: dict[int, dict[str, torch.Tensor]] = {}
        self.holder: dict[str, tuple[int, ...]] = {}

    def hand_out(self, worker: str, version: int, flats: Mapping[str, torch.Tensor]) -> None:
        """``worker`` now computes on ``version``, whose weights are ``flats``."""
        if version not in self.weights:
            self.weights[version] = {k: v.detach().clone() for k, v in flats.items()}
        held_by = (*self.holder.get(worker, ()), version)
        self.holder[worker] = held_by[-self.HELD_PER_WORKER:]
        held = {v for versions in self.holder.values() for v in versions}
        for v in [v for v in self.weights if v not in held]:
            del self.weights[v]

    def of(self, version: int) -> dict[str, torch.Tensor] | None:
        return self.weights.get(version)
