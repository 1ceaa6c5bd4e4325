"""Every problem package offers the same anatomy (edgewise.anatomy): a card registered as an
entry point, a policy registry, simulate(problem, policy, *, seed), an executor taking a
plan (or a policy), a bench spec, an API, a command group; and the five are named once."""

from __future__ import annotations

import ast
import inspect
import json
import pathlib
import subprocess
import sys
from importlib.metadata import entry_points
from typing import get_origin

import pytest

from edgewise.anatomy import ENTRY_POINT_GROUP, Problem, problem, problems
from edgewise.bench import BenchSpec, load_object
from edgewise.cli import GROUPS
from edgewise.cli.bench import BENCHES, LISTING
from edgewise.errors import ConfigError
from edgewise.jobs import ProblemApi
from edgewise.registry import Registry
from edgewise.service.problems import discover_problems

CARDS = problems()
NAMES = [c.name for c in CARDS]
SRC = pathlib.Path(__file__).parents[1] / "src" / "edgewise"


def test_the_five_problems_are_the_entry_points_cards_in_the_papers_order() -> None:
    assert NAMES == ["update", "pipeline", "continual", "sites", "modelparallel"]
    assert all(isinstance(c, Problem) for c in CARDS)
    assert {e.name for e in entry_points(group=ENTRY_POINT_GROUP)} == set(NAMES)
    assert [c.paper for c in CARDS] == ["deep-edge.md", "seifer.md", "ekya.md", "okita.md",
                                        "srole.md"]


def test_an_unknown_problem_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: update, pipeline"):
        problem("tiling")


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_the_card_names_types_the_package_exports(card: Problem) -> None:
    for name in (card.problem_type, card.plan_type, card.outcome_type):
        found = card.export(name)
        assert inspect.isclass(found) or get_origin(found) is not None, name  # or an alias


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_simulate_takes_problem_policy_and_a_keyword_seed(card: Problem) -> None:
    params = inspect.signature(card.simulate).parameters

    assert list(params)[:2] == ["problem", "policy"]
    assert params["seed"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_policies_are_registered_once_in_one_registry(card: Problem) -> None:
    registry = card.module("policies").REGISTRY

    assert isinstance(registry, Registry)
    assert card.policies() == registry.names()
    assert len(registry.names()) >= 2  # the paper's policy and at least one baseline or oracle


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_the_executor_takes_the_runtime_the_problem_and_the_plan(card: Problem) -> None:
    params = list(inspect.signature(card.execute).parameters)

    assert params[:3] == ["runtime", "problem", card.executor_takes]
    assert card.export("execute") is card.execute  # the facade's executor is the one


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_the_bench_is_a_spec_the_cli_runs(card: Problem) -> None:
    spec = load_object(BENCHES[card.bench])

    assert isinstance(spec, BenchSpec) and spec.name == card.bench
    assert LISTING[card.bench] == card.bench_line  # listed without importing the spec


@pytest.mark.parametrize("card", CARDS, ids=NAMES)
def test_the_command_group_is_the_cards(card: Problem) -> None:
    assert GROUPS[card.name] == card.cli_module
    assert hasattr(__import__(card.cli_module, fromlist=["app"]), "app")


def test_the_manager_discovers_the_five_problems_without_naming_them() -> None:
    found = discover_problems()

    assert all(isinstance(p, ProblemApi) for p in found)
    assert [p.name for p in found] == NAMES
    assert [tuple(k.name for k in p.kinds) for p in found] == [c.job_kinds for c in CARDS]


def test_problems_json_lists_each_card() -> None:
    shown = subprocess.run([sys.executable, "-c", "from edgewise.cli import main; main()",
                            "problems", "--json"], capture_output=True, text=True, check=True)
    rows = json.loads(shown.stdout)

    assert [r["name"] for r in rows] == NAMES
    assert [r["bench"] for r in rows] == [c.bench for c in CARDS]
    assert all(r["policies"] and r["job_kinds"] and r["paper"] for r in rows)


def test_the_cli_and_the_service_import_problems_only_through_their_facades() -> None:
    deep = []
    for folder in ("cli", "service"):
        for path in (SRC / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    parts = node.module.split(".")
                    if len(parts) > 2 and parts[0] == "edgewise" and parts[1] in NAMES:
                        deep.append(f"{path.name}:{node.lineno} {node.module}")
    assert deep == []


def test_loading_every_policy_imports_neither_torch_nor_ray() -> None:
    """A policy is a pure function of its problem and rng: importing every registered
    policy (and whatever they import, a third-party library's own imports included) loads
    no torch and no Ray. (FLAML, which loads Ray, came in through update's cost model.)"""
    script = ("import sys\nfrom edgewise.anatomy import problems\n"
              "for card in problems():\n    card.policies()\n"
              "print(sorted(m for m in ('torch', 'ray', 'flaml') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True)

    assert shown.stdout.strip() == "[]"
