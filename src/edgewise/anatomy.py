"""The anatomy every problem shares, as typed contracts (DESIGN.md, "The one idea").

Each problem package ``edgewise.<name>`` offers, under these names:

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

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

__all__ = [
    "ONLINE_EXECUTORS", "PROBLEMS", "Executor", "OnlinePolicy", "Outcome", "Policy", "Simulate",
]

PROBLEMS = ("update", "pipeline", "continual", "sites", "modelparallel")
"""The five problem packages, in the order of the papers' issues."""

ONLINE_EXECUTORS = ("continual",)
"""Problems whose executor takes the policy (plans made during the run, from what it
measures) rather than a plan made beforehand."""

ProblemT = TypeVar("ProblemT", contravariant=True)
PlanT = TypeVar("PlanT", covariant=True)
ObservationT = TypeVar("ObservationT", contravariant=True)
ActionT = TypeVar("ActionT", covariant=True)


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


class Simulate(Protocol):
    """``simulate(problem, policy, *, seed)``: the policy by name or as a callable."""

    def __call__(self, problem: Any, policy: Any, /, *, seed: int = 0) -> Outcome: ...


class Executor(Protocol):
    """``execute(runtime, problem, plan, ...)``: the plan carried out for real."""

    def __call__(self, runtime: Any, problem: Any, plan: Any, /, **options: Any) -> Any: ...
