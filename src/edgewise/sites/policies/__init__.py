"""Okita policies, registered by name: ``policy = POLICIES[name](problem, rng)``; the
simulator calls ``policy.step(state)`` once per slot and applies the returned decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from edgewise.registry import Registry
from edgewise.sites.problem import JobSlot, SitesProblem

__all__ = ["POLICIES", "OnlinePolicy", "PolicyFactory", "SlotState", "get_policy", "register"]


@dataclass(frozen=True, slots=True)
class SlotState:
    """What an online policy sees at the start of slot t: the arrived, unfinished jobs (in
    arrival order) and their remaining chunks per site M_i^r(t) (Eq. 3)."""

    slot: int
    remaining: Mapping[str, tuple[int, ...]]


class OnlinePolicy(Protocol):
    """A scheduler driven slot by slot; ``step`` returns that slot's decisions: one JobSlot
    per job that trains in slot t (no I/O, no clock; all randomness from its rng)."""

    def step(self, state: SlotState) -> tuple[JobSlot, ...]: ...


PolicyFactory = Callable[[SitesProblem, np.random.Generator], OnlinePolicy]


_REGISTRY: Registry[PolicyFactory] = Registry("edgewise.sites.policies")
POLICIES = _REGISTRY.entries  # filled on the first lookup (Registry.load)
register = _REGISTRY.register
get_policy = _REGISTRY.get
