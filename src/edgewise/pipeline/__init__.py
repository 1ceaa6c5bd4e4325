"""Partitioned, pipelined inference (SEIFER): where to cut a DNN and which device runs each
piece so that the pipeline's bottleneck latency is lowest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgewise.anatomy import Problem, lazy_facade

if TYPE_CHECKING:
    from edgewise.anatomy import Executor, Simulate
    from edgewise.pipeline.dispatcher import Splitter
    from edgewise.pipeline.generate import random_instance
    from edgewise.pipeline.policies import get_policy
    from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
    from edgewise.pipeline.realrun import BENCH_CLUSTER, bench_model, bench_problem
    from edgewise.pipeline.run import Dispatcher, PipelineRun, Result, execute
    from edgewise.pipeline.scale import serve, whole_model_outputs
    from edgewise.pipeline.scale_run import load_model, plan_on, run_json, setup
    from edgewise.pipeline.sim import PipelineOutcome, simulate
    from edgewise.pipeline.workload import (
        OutputCheck,
        compare_outputs,
        folder_inputs,
        model_and_example,
        partitioned,
        random_inputs,
        reference_outputs,
        workload_problem,
    )

    # mypy checks that the package's parts fit the anatomy's contracts
    _SIMULATE: Simulate[PipelineProblem] = simulate
    _EXECUTE: Executor[PipelineProblem, PipelinePlan] = execute

PROBLEM = Problem(
    name="pipeline", paper="seifer.md",
    title="SEIFER: partitioned, pipelined inference",
    problem_type="PipelineProblem", plan_type="PipelinePlan", outcome_type="PipelineOutcome",
    bench="seifer",
    bench_line=("SEIFER §6.1: partition-and-placement policies over the model zoo, and a real "
                  "pipeline."),
    job_kinds=("pipeline",), order=2, executor_takes="plan",
    policy_kind="a pure function plan = policy(problem, rng)")
"""This problem's card (entry point ``edgewise.problems``): the one place it is named."""

__getattr__ = lazy_facade(__name__, __file__)  # the names of the TYPE_CHECKING block

__all__ = [
    "BENCH_CLUSTER",
    "PROBLEM",
    "Dispatcher",
    "OutputCheck",
    "PipelineOutcome",
    "PipelinePlan",
    "PipelineProblem",
    "PipelineRun",
    "Result",
    "Splitter",
    "bench_model",
    "bench_problem",
    "compare_outputs",
    "execute",
    "folder_inputs",
    "get_policy",
    "load_model",
    "model_and_example",
    "partitioned",
    "plan_on",
    "random_inputs",
    "random_instance",
    "reference_outputs",
    "run_json",
    "serve",
    "setup",
    "simulate",
    "whole_model_outputs",
    "workload_problem",
]  # fmt: skip
