"""How the parameter server applies one push under a staleness treatment (no Ray here).

The optimiser (Adam or SGD) lives on the server only: workers keep no optimiser state, and
the server updates its moments (Adam's m and v, SGD's momentum buffer) once per applied
update, with the gradient as the treatment left it. Under staleness that state is handled
explicitly in two ways:

- the staleness-aware learning rate divides the *step* (the optimiser's ``lr`` for that one
  step), not the gradient: Adam normalises the gradient's scale away, so dividing the
  gradient would change nothing there, and the moments keep an unbiased gradient history;
- ``momentum_compensation`` lowers the configured momentum (SGD's momentum, Adam's beta1) by
  the momentum asynchrony adds on its own, ``1 - 1/(1 + tau)`` for the run's mean staleness
  ``tau`` (Mitliagkas et al. 2016), floored at 0, so that explicit plus implicit momentum
  stay at the configured value. Synchronous steps (staleness 0) leave it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from edgewise.runtime.staleness import (
    StalenessLedger,
    Treatment,
    VersionSnapshots,
    delay_compensated,
    gap_penalised,
    implicit_momentum,
    staleness_lr,
)
from edgewise.runtime.trainstate import FlatState, Pushed

__all__ = ["StaleApplier"]

_EMA = 0.9  # decay of the running mean staleness that momentum compensation follows


class StaleApplier:
    """Counts staleness, keeps the weights workers compute on (when the treatment needs
    them) and turns a push into the gradients, learning-rate factor and momentum of its
    optimiser step."""

    def __init__(self, treatment: Treatment, flat: FlatState, opt: torch.optim.Optimizer) -> None:
        self.treatment, self.flat, self.opt = treatment, flat, opt
        self.ledger = StalenessLedger()
        self.snapshots = VersionSnapshots()
        self.mean_staleness = 0.0
        self.state: dict[str, torch.Tensor] = {}  # DC-ASGD's mean square, gap-aware's C
        self.base_momentum = [_momentum(g) for g in opt.param_groups]

    def _params(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.flat.flats.items() if k.startswith("p.")}

    def hand_out(self, worker: str) -> None:
        """``worker`` gets the current weights (a pull or a push's reply)."""
        if self.treatment.needs_snapshots and worker:
            self.snapshots.hand_out(worker, self.ledger.version, self._params())

    def treat(self, pushed: Pushed) -> tuple[dict[str, torch.Tensor], float]:
        """The gradients to apply and the step's learning-rate factor; counts the push's
        staleness and advances the version."""
        base = pushed.base if pushed.base >= 0 else self.ledger.version
        tau = self.ledger.applied(min(base, self.ledger.version))
        self.mean_staleness = _EMA * self.mean_staleness + (1 - _EMA) * tau
        flats, name = dict(pushed.flats), self.treatment.name
        then = self.snapshots.of(base) if self.treatment.needs_snapshots else None
        if then is not None and tau > 0:
            for key, now in self._params().items():
                flats[key] = self._compensate(key, flats[key], now, then[key])
        factor = staleness_lr(1.0, tau) if name == "staleness-lr" else 1.0
        if self.treatment.batch_reference > 0 and name != "none":
            factor *= len(pushed.ids) / self.treatment.batch_reference
        if self.treatment.momentum_compensation and name != "none":
            self._compensate_momentum()
        return flats, factor

    def _compensate(self, key: str, grad: torch.Tensor, now: torch.Tensor,
                    then: torch.Tensor) -> torch.Tensor:
        t = self.treatment
        if t.name == "dc-asgd":
            ms = self.state.setdefault(f"ms.{key}", grad * grad)
            return delay_compensated(grad, now, then, ms, t.dc_lambda, t.dc_decay)
        step = self.state.get(f"c.{key}")
        return grad if step is None else gap_penalised(grad, now, then, step)

    def observe_step(self, before: Mapping[str, torch.Tensor]) -> None:
        """After a step: gap-aware's running mean of one update's absolute change."""
        if self.treatment.name != "gap-aware":
            return
        d = self.treatment.gap_decay
        for key, now in self._params().items():
            change = (now - before[key]).abs()
            held = self.state.get(f"c.{key}")
            self.state[f"c.{key}"] = change if held is None else held.mul_(d).add_(
                change, alpha=1 - d)

    def _compensate_momentum(self) -> None:
        implicit = implicit_momentum(self.mean_staleness)
        for group, base in zip(self.opt.param_groups, self.base_momentum, strict=True):
            _set_momentum(group, max(0.0, base - implicit))


def _momentum(group: Mapping[str, Any]) -> float:
    if "betas" in group:
        return float(group["betas"][0])
    return float(group.get("momentum", 0.0))


def _set_momentum(group: dict[str, Any], value: float) -> None:
    if "betas" in group:
        group["betas"] = (value, group["betas"][1])
    elif "momentum" in group:
        group["momentum"] = value
