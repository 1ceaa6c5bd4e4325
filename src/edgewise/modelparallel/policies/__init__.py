"""SROLE's compared methods (§V-B), each registered once by name in ``REGISTRY``.

A :class:`Method` says how the agents decide and which shield (if any) corrects their joint
action. Its learning agents are an :class:`~edgewise.anatomy.OnlinePolicy`
(:class:`AgentsPolicy`): the loop (``sim.simulate``, the bench, the PettingZoo env) shows
them each round (``step``) and returns the round's result (``learn``), as Flower's server
loop drives a Strategy. :func:`trained` wraps trained agents as a pure policy
``plan = policy(round, rng)``; ``exhaustive`` is the exact oracle on tiny networks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import overload

import numpy as np

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.cq import CQAgent
from edgewise.modelparallel.rounds import KAPPA, RoundResult, rewards
from edgewise.modelparallel.schedule import Decision, Plan, Round
from edgewise.modelparallel.shields import SHIELDS
from edgewise.registry import Registry

__all__ = ["LEARNERS", "REGISTRY", "AgentsPolicy", "Decide", "Method", "NodeAgents",
           "PlanPolicy", "PlanStep", "get_method", "shielded", "trained"]

Decide = Callable[[Round, Sequence[QAgent], np.random.Generator, bool], Decision]
PlanPolicy = Callable[[Round, np.random.Generator], Plan]
"""A pure policy: every job's task placement for one round, from the round and ``rng``."""


LEARNERS = {"q": QAgent, "cq": CQAgent}
"""Agent kinds: independent tabular Q-learning, CQ-learning (``cq``)."""


@dataclass(frozen=True, slots=True)
class Method:
    """A compared method: its decision rule, its shield (a name in ``shields.SHIELDS``;
    None: no shielding), whether it has learning agents (pre-trained, then online) and
    their kind (``learner``, a key of ``LEARNERS``)."""

    name: str
    decide: Decide
    shield: str | None = None
    learns: bool = True
    learner: str = "q"

    def new_agent(self) -> QAgent:
        """A fresh, untrained agent of this method's kind."""
        return LEARNERS[self.learner]()

    def policy(self, agents: Sequence[QAgent], rng: np.random.Generator, *,
               explore: bool = False, learning: bool = True,
               kappa: float = KAPPA) -> AgentsPolicy:
        """This method's agents as an online policy."""
        return AgentsPolicy(self, agents, rng, explore=explore, learning=learning, kappa=kappa)


REGISTRY: Registry[Callable[[], Method]] = Registry("edgewise.modelparallel.policies",
                                                   field="method")
"""Method name → a factory of its :class:`Method` (``rl``, ``marl``, ``srole-c`` …)."""


def get_method(name: str) -> Method:
    """The method called ``name``; ConfigError lists the known ones."""
    return REGISTRY.get(name)()


def shielded(dec: Decision, rnd: Round, shield: str | None) -> Decision:
    """``dec`` with its joint action corrected by ``shield`` (§IV-C/D); unchanged if None."""
    if shield is None:
        return dec
    sh = SHIELDS.get(shield)(rnd.network, rnd.jobs, dec.proposed, rnd.base_load(), rnd.alpha)
    return replace(dec, executed=sh.placements, changed=sh.changed, deferred=sh.deferred,
                   shield_ops=sh.ops, shield_seconds=sh.seconds)


class NodeAgents(Sequence[QAgent]):
    """One agent per node, each a copy of ``base`` made when the node first decides (most
    nodes of a large network never do, and a trained Q-table is large)."""

    def __init__(self, base: QAgent, n: int) -> None:
        self.base, self.n, self._made = base, n, dict[int, QAgent]()

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, j: int) -> QAgent: ...

    @overload
    def __getitem__(self, j: slice) -> Sequence[QAgent]: ...

    def __getitem__(self, j: int | slice) -> QAgent | Sequence[QAgent]:
        if isinstance(j, slice):
            return [self[k] for k in range(self.n)[j]]
        if not -self.n <= j < self.n:
            raise IndexError(j)
        j %= self.n
        if j not in self._made:
            self._made[j] = self.base.copy()
        return self._made[j]


class AgentsPolicy:
    """One method's agents (one Q-table per node) as an online policy: ``step(round)``
    decides every job's placement (§IV-B) and shields it (§IV-C/D); ``learn(result)``
    rewards each deciding agent for its job (−κ per moved layer, −γ or ρ/√O, §IV-C) and
    updates its Q-table, unless ``learning`` is off. ``explore``: ε-greedy actions (offline
    pre-training) instead of greedy ones (online, "the optimal action", §IV-B)."""

    def __init__(self, method: Method, agents: Sequence[QAgent], rng: np.random.Generator, *,
                 explore: bool = False, learning: bool = True, kappa: float = KAPPA) -> None:
        self.method, self.agents, self.rng = method, agents, rng
        self.explore, self.learning, self.kappa = explore, learning, kappa
        self._last: tuple[Round, Decision] | None = None

    def step(self, rnd: Round) -> Decision:
        """The joint action for ``rnd``: proposed by the agents, corrected by the shield."""
        dec = shielded(self.method.decide(rnd, self.agents, self.rng, self.explore), rnd,
                       self.method.shield)
        self._last = (rnd, dec)
        return dec

    def learn(self, feedback: RoundResult) -> None:
        """Reward and update the agents that decided the last step's jobs; each decision is
        marked disturbed if another agent proposed a layer on the same node (CQ-learning
        compares the returns of disturbed and undisturbed decisions)."""
        if not self.learning or self._last is None:
            return
        rnd, dec = self._last
        owners: dict[int, set[int]] = {}
        for j, p in enumerate(dec.proposed):
            for h in p.nodes:
                owners.setdefault(h, set()).add(j)
        for j, r in enumerate(rewards(feedback, rnd, dec, self.kappa)):
            disturbed = [len(owners[h] - {j}) > 0 for h in dec.proposed[j].nodes]
            self.agents[dec.deciders[j]].learn(dec.steps[j], r, disturbed)


class PlanStep:
    """A pure policy as an online one: ``step`` calls it (timed), ``learn`` does nothing."""

    def __init__(self, policy: PlanPolicy, rng: np.random.Generator) -> None:
        self.policy, self.rng = policy, rng

    def step(self, rnd: Round) -> Decision:
        started = time.perf_counter()
        plan = self.policy(rnd, self.rng)
        return Decision(plan, tuple(j.origin for j in rnd.jobs), tuple(() for _ in plan), 0,
                        time.perf_counter() - started)

    def learn(self, feedback: RoundResult) -> None:
        """Nothing to learn."""


def trained(method: str | Method, agent: QAgent) -> PlanPolicy:
    """SROLE's trained agents as a pure policy ``(round, rng) -> plan``: every node gets a
    copy of ``agent`` (pre-trained, ``sim.pretrain``), takes its greedy action and the
    method's shield corrects the joint action; the plan is what would be executed. The agent
    is not changed (no online learning)."""
    chosen = get_method(method) if isinstance(method, str) else method

    def policy(rnd: Round, rng: np.random.Generator) -> Plan:
        agents = NodeAgents(agent, rnd.network.n)
        return chosen.policy(agents, rng, learning=False).step(rnd).executed

    return policy
