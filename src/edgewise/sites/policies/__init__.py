"""Okita policies, registered by name: ``policy = REGISTRY.get(name)(problem, rng)`` makes an
online policy (:class:`edgewise.anatomy.OnlinePolicy`); the loop (the simulator) calls
``policy.step(state)`` once per slot, applies the returned decisions and tells the policy
what they did with ``policy.learn(feedback)``.

A policy does no I/O and reads no clock; all its randomness comes from its ``rng``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from edgewise.anatomy import OnlinePolicy
from edgewise.registry import Registry
from edgewise.sites.problem import JobSlot, SitesProblem

__all__ = ["POLICIES", "REGISTRY", "PolicyFactory", "Rule", "SlotFeedback", "SlotPolicy",
           "SlotState", "get_policy", "register"]


@dataclass(frozen=True, slots=True)
class SlotState:
    """What an online policy sees at the start of slot t: the arrived, unfinished jobs (in
    arrival order) and their remaining chunks per site M_i^r(t) (Eq. 3)."""

    slot: int
    remaining: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class SlotFeedback:
    """What the loop tells a policy after applying its decisions of slot t: the decisions,
    the bandwidth cost they incurred (Eq. 1: data transfer + parameter exchange) and the
    jobs that finished in the slot (their latency cost f_i is then known)."""

    slot: int
    applied: tuple[JobSlot, ...]
    bandwidth_cost: float
    finished: tuple[str, ...]


SlotPolicy = OnlinePolicy[SlotState, tuple[JobSlot, ...]]
"""An Okita scheduler: ``step(SlotState) -> decisions`` (one JobSlot per job that trains in
slot t), ``learn(SlotFeedback)``."""

PolicyFactory = Callable[[SitesProblem, np.random.Generator], SlotPolicy]


class Rule:
    """Base of the rule-based schedulers: they decide from the state alone and learn
    nothing from the feedback."""

    def learn(self, feedback: SlotFeedback, /) -> None:
        """Nothing to learn (a rule)."""


REGISTRY: Registry[PolicyFactory] = Registry("edgewise.sites.policies")
"""The Okita policies by name (each module of this package registers its own)."""
POLICIES = REGISTRY.entries  # filled on the first lookup (Registry.load)
register = REGISTRY.register
get_policy = REGISTRY.get
