"""Partition-and-placement policies, registered by name: ``plan = POLICIES[name](problem, rng)``.

Every policy is a pure function of ``(problem, rng)`` returning a
:class:`~edgewise.pipeline.problem.PipelinePlan`; hyper-parameters are keyword-only
arguments with defaults. A policy raises :class:`~edgewise.errors.InfeasibleError` when no
plan fits (a segment larger than every node's memory, more partitions than nodes, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from edgewise.errors import ConfigError
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem

__all__ = ["POLICIES", "Policy", "get_policy", "register"]

Policy = Callable[[PipelineProblem, np.random.Generator], PipelinePlan]
POLICIES: dict[str, Policy] = {}


P = TypeVar("P", bound=Policy)


def register(name: str) -> Callable[[P], P]:
    """Add a policy to the registry under ``name`` (its own signature, keywords included,
    is kept for direct callers)."""

    def add(fn: P) -> P:
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
    from edgewise.pipeline.policies import (  # noqa: F401  (registers)
        bottleneck_dp,
        exact,
        joint_greedy,
        random_policy,
        seifer,
    )
