"""SROLE's methods, registered by name: ``METHODS[name]`` says how agents decide and which
shield (if any) corrects their joint action (§V-B)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.problem import EdgeNetwork, Job, Placement
from edgewise.modelparallel.schedule import Decision, Round
from edgewise.modelparallel.shield import ShieldResult
from edgewise.registry import Registry

__all__ = ["METHODS", "Decide", "Method", "Shield", "get_method", "register"]

Decide = Callable[[Round, Sequence[QAgent], np.random.Generator, bool], Decision]
Shield = Callable[[EdgeNetwork, Sequence[Job], Sequence[Placement], NDArray[np.float64], float],
                  ShieldResult]


@dataclass(frozen=True, slots=True)
class Method:
    """A compared method: its decision rule and its shield (None: no shielding)."""

    name: str
    decide: Decide
    shield: Shield | None = None


_REGISTRY: Registry[Callable[[], Method]] = Registry("edgewise.modelparallel.policies",
                                                    field="method")
METHODS = _REGISTRY.entries
register = _REGISTRY.register


def get_method(name: str) -> Method:
    """The method called ``name`` (rl, marl, srole-c, srole-d); ConfigError lists them."""
    return _REGISTRY.get(name)()
