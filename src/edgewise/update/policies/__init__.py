"""Model-update policies, registered by name: ``plan = POLICIES[name](problem, rng)``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.errors import ConfigError
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["POLICIES", "Policy", "get_policy", "register"]

Policy = Callable[[UpdateProblem, np.random.Generator], UpdatePlan]
POLICIES: dict[str, Policy] = {}


def register(name: str) -> Callable[[Policy], Policy]:
    """Add a policy to the registry under ``name``."""

    def add(fn: Policy) -> Policy:
        POLICIES[name] = fn
        return fn

    return add


def get_policy(name: str) -> Policy:
    """The policy called ``name``; ConfigError lists the known ones."""
    _load()
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}",
                          field="policy")
    return POLICIES[name]


def _load() -> None:
    from edgewise.update.policies import deep_edge, exact, fair  # noqa: F401  (registers)
