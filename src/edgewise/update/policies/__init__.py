"""Model-update policies, registered by name: ``plan = POLICIES[name](problem, rng)``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.registry import Registry
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["POLICIES", "Policy", "get_policy", "register"]

Policy = Callable[[UpdateProblem, np.random.Generator], UpdatePlan]


def _load() -> None:
    from edgewise.update.policies import deep_edge, exact, fair  # noqa: F401  (registers)


_REGISTRY: Registry[Policy] = Registry(_load)
POLICIES = _REGISTRY.entries
register = _REGISTRY.register
get_policy = _REGISTRY.get
