"""Model-update policies, registered by name: ``plan = REGISTRY.get(name)(problem, rng)``.

``deep-edge`` (Algorithm 1 with GetMaxBatchSize also enforcing the pressure constraint),
``deep-edge-literal`` (Algorithm 1 as printed), ``fair`` (the §V-C baseline) and ``exact``
(the oracle for small instances). Each module registers its own with one decorator.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.registry import Registry
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["POLICIES", "REGISTRY", "Policy", "get_policy", "register"]

Policy = Callable[[UpdateProblem, np.random.Generator], UpdatePlan]
"""A pure planning policy: no I/O, no Ray; all randomness from the generator."""

REGISTRY: Registry[Policy] = Registry("edgewise.update.policies")
POLICIES = REGISTRY.entries  # filled on the first lookup (Registry.load)
register = REGISTRY.register
get_policy = REGISTRY.get
