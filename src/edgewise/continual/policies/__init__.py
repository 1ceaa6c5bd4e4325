"""Ekya scheduling policies, registered once by name: ``plan = REGISTRY.get(name)(problem,
rng)``, each a pure function of one decision's ``ContinualProblem`` (Algorithm 1's inputs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.continual.problem import ContinualPlan, ContinualProblem
from edgewise.registry import Registry

__all__ = ["POLICIES", "REGISTRY", "Policy", "get_policy", "register"]

Policy = Callable[[ContinualProblem, np.random.Generator], ContinualPlan]

REGISTRY: Registry[Policy] = Registry("edgewise.continual.policies")
POLICIES = REGISTRY.entries  # filled on the first lookup (Registry.load)
register = REGISTRY.register
get_policy = REGISTRY.get
