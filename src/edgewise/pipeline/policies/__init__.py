"""Partition-and-placement policies, registered by name: ``plan = REGISTRY.get(name)(problem,
rng)``.

Every policy is a pure function of ``(problem, rng)`` returning a
:class:`~edgewise.pipeline.problem.PipelinePlan`; hyper-parameters are keyword-only
arguments with defaults. A policy raises :class:`~edgewise.errors.InfeasibleError` when no
plan fits (a segment larger than every node's memory, more partitions than nodes, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.registry import Registry

__all__ = ["POLICIES", "REGISTRY", "Policy", "get_policy", "register"]

Policy = Callable[[PipelineProblem, np.random.Generator], PipelinePlan]

REGISTRY: Registry[Policy] = Registry("edgewise.pipeline.policies")
"""The pipeline's policies by name (each module of this package registers its own)."""
POLICIES = REGISTRY.entries  # filled on the first lookup (Registry.load)
register = REGISTRY.register
get_policy = REGISTRY.get
