"""Checkpoint-aware planning (§5): the thief with an estimate that counts each epoch's
checkpoint served during retraining, an option beside the paper's protocol."""

from __future__ import annotations

import numpy as np

from edgewise.continual.policies import register
from edgewise.continual.policies._grid import build_lattice, make_plan
from edgewise.continual.policies.thief import thief_allocation
from edgewise.continual.problem import ContinualPlan, ContinualProblem

__all__ = ["thief_checkpoints"]


@register("thief-checkpoints")
def thief_checkpoints(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
    """Algorithm 1's stealing over PickConfigs tables whose line 7 is the checkpoint-aware
    estimate: inference serves every epoch's checkpoint as it is written (§5, "model
    checkpointing and reloading"), so a retraining that will not finish in the window still
    counts for its checkpoints (the paper's estimate counts it as nothing). Only meaningful
    where the executor serves checkpoints (``TraceProblem(serve_checkpoints=True)``, the
    real runtime's hot-loading); with no checkpoints in the options it plans as ``thief``.
    The estimate counts no cost for loading a checkpoint. Deterministic; ``rng`` unused."""
    lattice = build_lattice(problem, checkpoints=True)
    return make_plan(lattice, thief_allocation(lattice))
