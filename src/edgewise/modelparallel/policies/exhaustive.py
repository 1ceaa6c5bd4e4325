"""The exact oracle for tiny rounds: every placement of every task tried, the valid one with
the least total JCT kept (the yardstick the learned policies are tested against)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.jct import invalid_reason, job_completion_time_s, occupancy
from edgewise.modelparallel.policies import REGISTRY, Method, PlanStep
from edgewise.modelparallel.problem import TaskPlacement
from edgewise.modelparallel.schedule import Decision, Plan, Round

__all__ = ["MAX_PLANS", "exhaustive", "plan_cost"]

MAX_PLANS = 200_000  # placements tried at most; beyond, the round is not "tiny"


def plan_cost(rnd: Round, plan: Plan) -> tuple[bool, float]:
    """(valid, total JCT) of ``plan`` at the round's profiled demands: valid when every job
    can run (`jct.invalid_reason`: no memory above capacity, §IV-B, nor any resource under
    the ``invalid`` overload model); the JCTs at the plan's joint load."""
    occ = occupancy(rnd.network, rnd.jobs, plan, rnd.background)
    valid = all(invalid_reason(j, p, rnd.network, occ.load, rnd.overload) is None
                for j, p in zip(rnd.jobs, plan, strict=True))
    total = sum(job_completion_time_s(j, p, rnd.network, occ, rnd.alpha, rnd.overload)
                for j, p in zip(rnd.jobs, plan, strict=True))
    return valid, float(total)


def exhaustive(rnd: Round, rng: np.random.Generator) -> Plan:
    """The valid plan of least total JCT, each task on a candidate of its job's origin
    (itself or a neighbour, the MARL action space of §IV-B); ties go to the first plan in
    the candidates' order. ``rng`` is unused: the oracle is exact.

    Raises
    ------
    ConfigError
        If the round has more than ``MAX_PLANS`` placements.
    InfeasibleError
        If no placement is valid.
    """
    choices = [rnd.network.candidates(job.origin) for job in rnd.jobs
               for _ in job.partitions]
    count = int(np.prod([len(c) for c in choices], dtype=np.float64))
    if count > MAX_PLANS:
        raise ConfigError(f"{count} placements, more than {MAX_PLANS}: not a tiny round",
                          field="round")
    best: tuple[float, Plan] | None = None
    for hosts in itertools.product(*choices):
        plan = _split(rnd, hosts)
        valid, total = plan_cost(rnd, plan)
        if valid and (best is None or total < best[0]):
            best = (total, plan)
    if best is None:
        raise InfeasibleError("no placement of the round's tasks is valid (memory, or every "
                              "resource under the invalid overload model)")
    return best[1]


def _split(rnd: Round, hosts: Sequence[int]) -> Plan:
    out, at = [], 0
    for job in rnd.jobs:
        out.append(TaskPlacement(tuple(hosts[at:at + len(job.partitions)])))
        at += len(job.partitions)
    return tuple(out)


def _decide(rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
            explore: bool) -> Decision:
    return PlanStep(exhaustive, rng).step(rnd)


@REGISTRY.register("exhaustive")
def oracle() -> Method:
    """The exact oracle (tiny rounds only): no agents, no shield."""
    return Method("exhaustive", _decide, learns=False)
