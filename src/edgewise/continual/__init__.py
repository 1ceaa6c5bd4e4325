"""Ekya: joint retraining and inference of video-analytics models on shared edge accelerators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgewise.anatomy import Problem, lazy_facade
from edgewise.continual.estimate import estimate_accuracy, pick_inference
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceConfig,
    InferenceOption,
    RetrainConfig,
    RetrainOption,
    StreamDecision,
    StreamState,
    default_inference_configs,
    default_retrain_configs,
)

if TYPE_CHECKING:
    from edgewise.anatomy import Executor, Simulate
    from edgewise.continual.microprofiler import MicroProfile, microprofile, prepare_window
    from edgewise.continual.policies import get_policy
    from edgewise.continual.run import (
        DEVICE,
        LiveProblem,
        RunSettings,
        WindowResult,
        edge_cluster,
        execute,
        offline_inference_options,
        plan_window,
    )
    from edgewise.continual.sim import SimOutcome, TraceProblem, simulate
    from edgewise.continual.workload import EdgeModels, edge_models, frame_streams

    # mypy checks that the package's parts fit the anatomy's contracts
    _SIMULATE: Simulate[TraceProblem] = simulate
    _EXECUTE: Executor[LiveProblem, str] = execute  # a policy by name (or a callable)

PROBLEM = Problem(
    name="continual", paper="ekya.md",
    title="Ekya: continuous learning on shared edge accelerators",
    problem_type="ContinualProblem", plan_type="ContinualPlan", outcome_type="SimOutcome",
    bench="ekya",
    bench_line="Ekya §6: thief vs uniform over streams and accelerators, and real windows.",
    job_kinds=("continual",), order=3, executor_takes="policy",
    policy_kind=("a pure function plan = policy(problem, rng), called by the executor at each "
                   "window"))
"""This problem's card (entry point ``edgewise.problems``): the one place it is named."""

__getattr__ = lazy_facade(__name__, __file__)  # the names of the TYPE_CHECKING block

__all__ = [
    "DEVICE",
    "PROBLEM",
    "ContinualPlan",
    "ContinualProblem",
    "EdgeModels",
    "InferenceConfig",
    "InferenceOption",
    "LiveProblem",
    "MicroProfile",
    "RetrainConfig",
    "RetrainOption",
    "RunSettings",
    "SimOutcome",
    "StreamDecision",
    "StreamState",
    "TraceProblem",
    "WindowResult",
    "default_inference_configs",
    "default_retrain_configs",
    "edge_cluster",
    "edge_models",
    "estimate_accuracy",
    "execute",
    "frame_streams",
    "get_policy",
    "microprofile",
    "offline_inference_options",
    "pick_inference",
    "plan_window",
    "prepare_window",
    "simulate",
]  # fmt: skip
