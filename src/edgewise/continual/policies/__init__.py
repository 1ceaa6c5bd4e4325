"""Ekya scheduling policies, registered by name: ``plan = POLICIES[name](problem, rng)``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.continual.problem import ContinualPlan, ContinualProblem
from edgewise.registry import Registry

__all__ = ["POLICIES", "Policy", "get_policy", "register"]

Policy = Callable[[ContinualProblem, np.random.Generator], ContinualPlan]


_REGISTRY: Registry[Policy] = Registry("edgewise.continual.policies")
POLICIES = _REGISTRY.entries  # filled on the first lookup (Registry.load)
register = _REGISTRY.register
get_policy = _REGISTRY.get
