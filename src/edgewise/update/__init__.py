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

_EXPORTS = {
    "CALIBRATED": "models",
    "NAME_PATTERN": "models",
    "REGISTRY": "policies",
    "get_policy": "policies",
    "UpdatePlan": "problem",
    "UpdateProblem": "problem",
    "APP_COLUMNS": "run",
    "UpdateRun": "run",
    "app_row": "run",
    "cluster_problem": "run",
    "execute": "run",
    "to_train_plan": "run",
    "UpdateOutcome": "sim",
    "score": "sim",
    "simulate": "sim",
    "load_models": "models",
}
"""The package's public names → the module that defines each (loaded on first use)."""

__getattr__ = lazy_facade(__name__, _EXPORTS)

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
