"""Model-parallel training placement on edge clusters (SROLE): each node's RL agent places its
job's layer partitions among its neighbours, a shield keeps nodes below the overload threshold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgewise.anatomy import Problem, lazy_facade

if TYPE_CHECKING:
    from edgewise.anatomy import Executor, Simulate
    from edgewise.modelparallel.agentfile import load_agents, save_agents
    from edgewise.modelparallel.agents import QAgent
    from edgewise.modelparallel.benchfigs import METHOD_NAMES
    from edgewise.modelparallel.emulated import cluster_network
    from edgewise.modelparallel.jobs import check_model
    from edgewise.modelparallel.models import srole_models
    from edgewise.modelparallel.network import random_network
    from edgewise.modelparallel.policies import get_method
    from edgewise.modelparallel.problem import TaskPlacement
    from edgewise.modelparallel.realbench import (
        BENCH_BATCH,
        BENCH_WIDTH,
        LR,
        OPTIMIZER,
        bench_model,
        digits_batches,
        sequential_job,
        sequential_levels,
        spread_placement,
    )
    from edgewise.modelparallel.realjob import spread_training
    from edgewise.modelparallel.rounds import KAPPA, RoundResult, random_round
    from edgewise.modelparallel.run import execute
    from edgewise.modelparallel.schedule import Plan, Round
    from edgewise.modelparallel.sim import SimOutcome, SroleProblem, simulate
    from edgewise.modelparallel.training import play_round, pretrain
    from edgewise.modelparallel.workloads import ModelRef

    # mypy checks that the package's parts fit the anatomy's contracts
    _SIMULATE: Simulate[SroleProblem] = simulate
    _EXECUTE: Executor[Round, tuple[TaskPlacement, ...]] = execute

PROBLEM = Problem(
    name="modelparallel", paper="srole.md",
    title="SROLE: shielded multi-agent RL placement of model-parallel training",
    problem_type="SroleProblem", plan_type="Plan", outcome_type="SimOutcome",
    bench="srole",
    bench_line="SROLE §V: job completion time, collisions and shield overhead of the methods.",
    job_kinds=("modelparallel",), order=5, executor_takes="plan",
    policy_kind=("a Method factory: learning agents (RL) or rules, each placing its node's jobs "
                   "round by round"))
"""This problem's card (entry point ``edgewise.problems``): the one place it is named."""

__getattr__ = lazy_facade(__name__, __file__)  # the names of the TYPE_CHECKING block

__all__ = [
    "BENCH_BATCH",
    "BENCH_WIDTH",
    "KAPPA",
    "LR",
    "METHOD_NAMES",
    "OPTIMIZER",
    "PROBLEM",
    "ModelRef",
    "Plan",
    "QAgent",
    "Round",
    "RoundResult",
    "SimOutcome",
    "SroleProblem",
    "bench_model",
    "check_model",
    "cluster_network",
    "digits_batches",
    "execute",
    "get_method",
    "load_agents",
    "play_round",
    "pretrain",
    "random_network",
    "random_round",
    "save_agents",
    "sequential_job",
    "sequential_levels",
    "simulate",
    "spread_placement",
    "spread_training",
    "srole_models",
]
