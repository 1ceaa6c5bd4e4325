"""Model-update policies, registered by name: ``plan = POLICIES[name](problem, rng)``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.registry import Registry
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["POLICIES", "Policy", "get_policy", "register"]

Policy = Callable[[UpdateProblem, np.random.Generator], UpdatePlan]


_REGISTRY: Registry[Policy] = Registry("edgewise.update.policies")
POLICIES = _REGISTRY.entries  # filled on the first lookup (Registry.load)
register = _REGISTRY.register
get_policy = _REGISTRY.get
