"""The ablations of Figure 8: Ekya-FixedRes and Ekya-FixedConfig (factories, not registered:
each needs the uniform baseline's split or configuration as a parameter)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edgewise.continual.estimate import stream_table
from edgewise.continual.policies import Policy
from edgewise.continual.policies._grid import Lattice, build_lattice, make_plan
from edgewise.continual.policies.thief import thief_allocation
from edgewise.continual.problem import ContinualPlan, ContinualProblem

__all__ = ["fixed_config_policy", "fixed_res_policy"]


def fixed_res_policy(inference_fraction: float) -> Policy:
    """Ekya-FixedRes: PickConfigs (Algorithm 2) on the uniform baseline's static split."""

    def policy(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
        share = problem.accelerators / len(problem.streams)
        shares = np.array([(1 - inference_fraction) * share, inference_fraction * share])
        tables = tuple(stream_table(s, shares, problem.window_s, problem.a_min)
                       for s in problem.streams)
        lattice = Lattice(problem, shares, (0, 1) * len(problem.streams), 0, tables,
                          float(len(problem.streams) + 1),
                          tuple(True for _ in problem.streams))
        return make_plan(lattice, [0, 1] * len(problem.streams))

    return policy


def fixed_config_policy(config: str) -> Policy:
    """Ekya-FixedConfig: the thief's allocation (Algorithm 1) with γ fixed to ``config``."""

    def policy(problem: ContinualProblem, rng: np.random.Generator) -> ContinualPlan:
        streams = tuple(replace(s, retrain=tuple(o for o in s.retrain
                                                 if o.config == config or len(s.retrain) == 1))
                        for s in problem.streams)
        lattice = build_lattice(replace(problem, streams=streams))
        return make_plan(lattice, thief_allocation(lattice))

    return policy
