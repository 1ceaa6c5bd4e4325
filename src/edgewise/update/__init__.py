"""Model update (Deep-Edge): which devices retrain, with how much data and what batch size
each, without making co-located latency-critical apps miss their deadlines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgewise.anatomy import Problem, lazy_facade

if TYPE_CHECKING:
    from edgewise.anatomy import Executor, Simulate
    from edgewise.update.models import CALIBRATED, NAME_PATTERN, load_models
    from edgewise.update.policies import REGISTRY, get_policy
    from edgewise.update.problem import UpdatePlan, UpdateProblem
    from edgewise.update.run import (
        APP_COLUMNS,
        UpdateRun,
        app_row,
        cluster_problem,
        execute,
        to_train_plan,
    )
    from edgewise.update.sim import UpdateOutcome, score, simulate

    # mypy checks that the package's parts fit the anatomy's contracts
    _SIMULATE: Simulate[UpdateProblem] = simulate
    _EXECUTE: Executor[UpdateProblem, UpdatePlan] = execute

PROBLEM = Problem(
    name="update", paper="deep-edge.md",
    title="Deep-Edge: interference-aware model update",
    problem_type="UpdateProblem", plan_type="UpdatePlan", outcome_type="UpdateOutcome",
    bench="deep-edge",
    bench_line="Deep-Edge §V-C: deep-edge vs fair on random testbed experiments.",
    job_kinds=("update",), order=1, executor_takes="plan",
    policy_kind="a pure function plan = policy(problem, rng)")
"""This problem's card (entry point ``edgewise.problems``): the one place it is named."""

__getattr__ = lazy_facade(__name__, __file__)  # the names of the TYPE_CHECKING block

__all__ = [
    "APP_COLUMNS",
    "CALIBRATED",
    "NAME_PATTERN",
    "PROBLEM",
    "REGISTRY",
    "UpdateOutcome",
    "UpdatePlan",
    "UpdateProblem",
    "UpdateRun",
    "app_row",
    "cluster_problem",
    "execute",
    "get_policy",
    "load_models",
    "score",
    "simulate",
    "to_train_plan",
]
