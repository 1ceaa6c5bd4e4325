"""Every problem package offers the same anatomy (edgewise.anatomy): a policy registry,
simulate(problem, policy, *, seed), an executor taking a plan, a bench spec and an API."""

from __future__ import annotations

import importlib
import inspect

import pytest

from edgewise.anatomy import ONLINE_EXECUTORS, PROBLEMS
from edgewise.bench import BenchSpec
from edgewise.cli.bench import BENCHES, LISTING
from edgewise.registry import Registry
from edgewise.runtime.jobs import ProblemApi
from edgewise.service.problems import discover_problems


@pytest.mark.parametrize("name", PROBLEMS)
def test_simulate_takes_problem_policy_and_a_keyword_seed(name: str) -> None:
    simulate = importlib.import_module(f"edgewise.{name}.sim").simulate

    params = inspect.signature(simulate).parameters

    assert list(params)[:2] == ["problem", "policy"]
    assert params["seed"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("name", PROBLEMS)
def test_policies_are_registered_once_in_one_registry(name: str) -> None:
    registry = importlib.import_module(f"edgewise.{name}.policies").REGISTRY

    assert isinstance(registry, Registry)
    assert len(registry.names()) >= 2  # the paper's policy and at least one baseline or oracle


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_executor_takes_the_runtime_the_problem_and_the_plan(name: str) -> None:
    execute = importlib.import_module(f"edgewise.{name}.run").execute

    third = "policy" if name in ONLINE_EXECUTORS else "plan"
    assert list(inspect.signature(execute).parameters)[:3] == ["runtime", "problem", third]


@pytest.mark.parametrize("name", PROBLEMS)
def test_the_bench_is_a_spec_the_cli_runs(name: str) -> None:
    spec = importlib.import_module(f"edgewise.{name}.bench").SPEC

    assert isinstance(spec, BenchSpec)
    assert BENCHES[spec.name] == f"edgewise.{name}.bench:SPEC"
    assert LISTING[spec.name]  # listed by `edgewise bench --help` without importing it


def test_the_manager_discovers_the_five_problems_without_naming_them() -> None:
    found = discover_problems()

    assert all(isinstance(p, ProblemApi) for p in found)
    assert sorted(p.name for p in found) == sorted(PROBLEMS)
