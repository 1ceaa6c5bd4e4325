"""The anatomy every problem shares, as typed contracts (DESIGN.md, "The one idea").

Each problem package ``edgewise.<name>`` exports one :class:`Problem` card, ``PROBLEM``,
registered as the entry point ``edgewise.problems`` (the one place that names the five
problems; :func:`problems` reads them). The card names the paper and the parts; the parts
load when asked for (a card costs no import of torch or Ray). The package offers, under
these names:

- ``policies.REGISTRY``: its policies by name; a policy is ``plan = policy(problem, rng)``,
  a pure function (:class:`Policy`), or a factory of an :class:`OnlinePolicy` when decisions
  are made step by step (Okita's slots, SROLE's rounds);
- ``sim.simulate(problem, policy, *, seed) -> Outcome``: deterministic for a seed; the
  outcome keeps wall-clock figures apart in its ``timings`` (:class:`Outcome`);
- ``run.execute(runtime, problem, plan, ...)``: carries the plan a policy made out on a Ray
  cluster (emulated, testbed or real devices) (:class:`Executor`); where the plans depend
  on what the run itself measures (:data:`ONLINE_EXECUTORS`: Ekya re-plans every window
  from the micro-profiles of that window's frames), the executor takes the policy instead
  and calls it at each decision point;
- ``bench.SPEC``: its headline experiment as an ``edgewise.bench.BenchSpec``.

Like Flower's Strategy, a policy never runs the loop: the simulator or the executor does,
and calls the policy; so one policy serves both.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from edgewise.errors import ConfigError

if TYPE_CHECKING:  # annotations only: a card costs no NumPy import (the CLI's start)
    import numpy as np

__all__ = [
    "ENTRY_POINT_GROUP", "Executor", "OnlinePolicy", "Outcome", "Policy", "Problem", "Simulate",
    "lazy_facade", "problem", "problem_names", "problems",
]

ENTRY_POINT_GROUP = "edgewise.problems"
"""The entry-point group under which each problem package registers its :class:`Problem`."""

Part = Literal["problem", "policies", "sim", "run", "bench", "api"]
"""The modules of every problem package, one vocabulary: ``problem.py`` < ``policies/``
< ``sim.py`` < ``run.py`` (the one executor) < ``bench.py`` and ``api.py``."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem package's card: its name (the package, the CLI group, the entry point),
    the paper it implements, its Problem, Plan and Outcome types (names in the package's
    public facade), its bench's name, its kinds of job, and how its executor takes its
    decisions (``plan``: a plan made beforehand; ``policy``: the executor calls the policy
    during the run, Ekya's windows). The parts load on demand."""

    name: str
    paper: str
    title: str
    problem_type: str
    plan_type: str
    outcome_type: str
    bench: str
    bench_line: str
    job_kinds: tuple[str, ...]
    order: int
    executor_takes: Literal["plan", "policy"] = "plan"
    policy_kind: str = "a pure function plan = policy(problem, rng)"

    def module(self, part: Part) -> ModuleType:
        """The package's module ``part`` (imported now)."""
        return importlib.import_module(f"edgewise.{self.name}.{part}")

    def export(self, name: str) -> Any:
        """A public name of the package (its facade), imported now."""
        return getattr(importlib.import_module(f"edgewise.{self.name}"), name)

    def policies(self) -> list[str]:
        """The names in the problem's policy registry."""
        names: list[str] = self.module("policies").REGISTRY.names()
        return names

    @property
    def simulate(self) -> Simulate[Any]:
        found: Simulate[Any] = self.module("sim").simulate
        return found

    @property
    def execute(self) -> Executor[Any, Any]:
        found: Executor[Any, Any] = self.module("run").execute
        return found

    @property
    def cli_module(self) -> str:
        """The module of its command group, ``edgewise <name> ...`` (a ``typer.Typer``
        named ``app``): the command line sits above the problems, so the card names it."""
        return f"edgewise.cli.{self.name}"

    @property
    def bench_spec_ref(self) -> str:
        """``"module:SPEC"`` of the problem's bench (``edgewise.bench.load_object``)."""
        return f"edgewise.{self.name}.bench:SPEC"

    def api(self) -> Any:
        """The problem's offer to the manager (an ``edgewise.jobs.ProblemApi``)."""
        return self.module("api").API

    def listing(self) -> dict[str, Any]:
        """What ``edgewise problems --json`` shows (imports the policy registry)."""
        return {"name": self.name, "paper": self.paper, "title": self.title,
                "types": {"problem": self.problem_type, "plan": self.plan_type,
                          "outcome": self.outcome_type},
                "policies": self.policies(), "policy_kind": self.policy_kind,
                "executor_takes": self.executor_takes, "bench": self.bench,
                "job_kinds": list(self.job_kinds), "cli": f"edgewise {self.name}"}


@cache
def problems() -> tuple[Problem, ...]:
    """Every :class:`Problem` registered under ``edgewise.problems``, in the papers'
    order; ConfigError if an entry is not a Problem, or two share a name."""
    found: dict[str, Problem] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        card = entry.load()
        if not isinstance(card, Problem) or card.name != entry.name:
            raise ConfigError(f"entry point {entry.value} is not the Problem {entry.name!r}",
                              field=ENTRY_POINT_GROUP)
        if card.name in found:
            raise ConfigError(f"two problems named {card.name!r}", field=ENTRY_POINT_GROUP)
        found[card.name] = card
    return tuple(sorted(found.values(), key=lambda c: c.order))


def problem_names() -> tuple[str, ...]:
    """The problems' names, from the entry points' names alone (nothing imported)."""
    return tuple(sorted({e.name for e in entry_points(group=ENTRY_POINT_GROUP)}))


def problem(name: str) -> Problem:
    """The problem called ``name``; ConfigError listing the known ones."""
    for card in problems():
        if card.name == name:
            return card
    known = ", ".join(c.name for c in problems())
    raise ConfigError(f"unknown problem {name!r}; known: {known}", field="problem")

ProblemT = TypeVar("ProblemT", contravariant=True)
PlanT = TypeVar("PlanT", covariant=True)
ObservationT = TypeVar("ObservationT", contravariant=True)
ActionT = TypeVar("ActionT", covariant=True)
PlanT_in = TypeVar("PlanT_in", contravariant=True)


class Policy(Protocol[ProblemT, PlanT]):
    """A pure planning policy: no I/O, no Ray, no globals; all randomness from ``rng``."""

    def __call__(self, problem: ProblemT, rng: np.random.Generator, /) -> PlanT: ...


@runtime_checkable
class OnlinePolicy(Protocol[ObservationT, ActionT]):
    """A policy that decides step by step: the loop (simulator or executor) shows it what
    it may see at each step and applies the action it returns. ``learn`` receives the
    outcome of the step's action (the reward of a learning agent; a no-op for a rule)."""

    def step(self, observation: ObservationT, /) -> ActionT: ...

    def learn(self, feedback: Any, /) -> None: ...


@runtime_checkable
class Outcome(Protocol):
    """What a simulation yields: deterministic figures plus ``timings``, the wall-clock
    seconds measured on the way (decision times), which no equality test may compare."""

    @property
    def timings(self) -> Mapping[str, float]: ...


class Simulate(Protocol[ProblemT]):
    """``simulate(problem, policy, *, seed)``: the policy by name or as a callable."""

    def __call__(self, problem: ProblemT, policy: Any, /, *, seed: int = 0) -> Outcome: ...


class Executor(Protocol[ProblemT, PlanT_in]):
    """``execute(runtime, problem, plan, ...)``: the plan carried out for real (its options,
    such as the model and the inputs, are the problem's own)."""

    def __call__(self, runtime: Any, problem: ProblemT, plan: PlanT_in, /, *args: Any,
                 **options: Any) -> Any: ...


def lazy_facade(package: str, source: str) -> Any:
    """A package's ``__getattr__`` (PEP 562) for its public names: the names its
    ``if TYPE_CHECKING:`` block imports from its own modules (``source``: the package's
    ``__init__.py``), each imported from that module on first use. So that ``from
    edgewise.update import execute`` is the one way the CLI and the service reach a
    problem, while importing the package (a worker importing ``edgewise.update.policies``)
    loads nothing else; mypy reads the same block, so the two cannot drift. The block is
    parsed at the first name looked up, not when the package is imported (as
    scientific-python's ``lazy_loader.attach_stub`` reads a ``.pyi``)."""
    exports: dict[str, str] = {}

    def __getattr__(name: str) -> Any:
        if not exports:
            exports.update(_type_checking_imports(package, source))
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__


def _type_checking_imports(package: str, source: str) -> dict[str, str]:
    """Name → module of every ``from <package>.<module> import name`` inside an
    ``if TYPE_CHECKING:`` block of the file ``source``."""
    import ast
    from pathlib import Path

    found: dict[str, str] = {}
    for node in ast.parse(Path(source).read_text()).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and (item.module or "").startswith(
                        package + "."):
                    found.update((a.asname or a.name, str(item.module)) for a in item.names)
    return found
