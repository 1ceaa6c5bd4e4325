"""Simulates a method round by round (§IV-B/C): decide, shield, run, reward, learn; offline
pre-training on random networks, then online learning on the evaluated one. Deterministic
from its seed; wall-clock seconds are kept apart in the outcome's ``timings``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from edgewise.anatomy import OnlinePolicy
from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import pretraining_network
from edgewise.modelparallel.policies import Method, PlanPolicy, PlanStep, get_method
from edgewise.modelparallel.problem import ALPHA, EdgeNetwork
from edgewise.modelparallel.rounds import KAPPA, RoundResult, outcome, random_round
from edgewise.modelparallel.schedule import Decision, Round

__all__ = ["SimOutcome", "SroleProblem", "play_round", "pretrain", "simulate"]

Seed = int | Sequence[int]
Online = OnlinePolicy[Round, Decision]


@dataclass(frozen=True, slots=True)
class SroleProblem:
    """SROLE's problem on one network (§V-A): ``rounds`` scheduling rounds, each with
    ``jobs_per_cluster`` jobs of ``model`` at random nodes of every cluster (one task per
    model level, or ``n_partitions`` groups of levels) over the PageRank background of
    ``workload_pct``; overload above ``alpha``; agents rewarded −``kappa`` per layer a
    shield moves. Learning methods are first pre-trained for ``pretrain_rounds`` rounds on
    fresh random networks of §V-A's "RL Training" ranges, on ``pretrain_models``."""

    network: EdgeNetwork
    model: str = "vgg-16"
    workload_pct: float = 100.0
    rounds: int = 60
    n_partitions: int | None = None
    kappa: float = KAPPA
    alpha: float = ALPHA
    pretrain_rounds: int = 1500
    pretrain_models: tuple[str, ...] = field(default_factory=lambda: tuple(srole_models()))


@dataclass(frozen=True, slots=True)
class SimOutcome:
    """Every round's result, in order, and the wall-clock ``timings``: the mean seconds per
    round of the busiest decider (``decision_seconds``) and of the slowest shield
    (``shield_seconds``)."""

    rounds: tuple[RoundResult, ...]
    timings: Mapping[str, float]

    def jct_s(self) -> list[float]:
        """Every job's JCT, round by round."""
        return [t for r in self.rounds for t in r.jct_s]


def _seeds(seed: Seed) -> list[int]:
    return [seed] if isinstance(seed, int) else list(seed)


def _online(problem: SroleProblem, policy: str | Method | PlanPolicy | Online,
            rng: np.random.Generator, agent: QAgent | None, seeds: list[int]) -> Online:
    if isinstance(policy, str):
        policy = get_method(policy)
    if isinstance(policy, Method):
        if not policy.learns:
            return policy.policy([], rng, learning=False)
        base = agent if agent is not None else pretrain(policy, problem.pretrain_models,
                                 np.random.default_rng([*seeds, 100]),
                                 problem.pretrain_rounds, kappa=problem.kappa,
                                 n_partitions=problem.n_partitions)
        agents = [base.copy() for _ in range(problem.network.n)]
        return policy.policy(agents, rng, kappa=problem.kappa)
    if isinstance(policy, OnlinePolicy):
        return policy
    return PlanStep(policy, rng)


def simulate(problem: SroleProblem, policy: str | Method | PlanPolicy | Online, *,
             seed: Seed = 0, agent: QAgent | None = None) -> SimOutcome:
    """Play ``problem.rounds`` rounds (drawn from ``[*seed, 1]``) with ``policy``: a method
    by name or as a :class:`Method` (its agents pre-trained from ``[*seed, 100]``, or copies
    of ``agent``, then greedy with online learning, §IV-B), a pure policy
    ``(round, rng) -> plan`` (e.g. ``policies.trained``) or an online policy. Actions draw
    from ``[*seed, 2]``. Same seed, same results (``timings`` aside)."""
    seeds = _seeds(seed)
    gen = np.random.default_rng([*seeds, 1])
    rnds = [random_round(problem.network, problem.model, problem.workload_pct, gen,
                         problem.n_partitions, problem.alpha) for _ in range(problem.rounds)]
    online = _online(problem, policy, np.random.default_rng([*seeds, 2]), agent, seeds)
    results, decide_s, shield_s = [], 0.0, 0.0
    for rnd in rnds:
        dec = online.step(rnd)
        result = outcome(rnd, dec)
        online.learn(result)
        results.append(result)
        decide_s, shield_s = decide_s + dec.seconds, shield_s + dec.shield_seconds
    n = max(1, len(results))
    return SimOutcome(tuple(results), {"decision_seconds": decide_s / n,
                                       "shield_seconds": shield_s / n})


def play_round(method: Method, rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
               *, explore: bool = True, learn: bool = True,
               kappa: float = KAPPA) -> RoundResult:
    """One round of ``method``'s agents: decide (§IV-B), shield (§IV-C/D), run every job at
    the joint load, reward and learn."""
    online = method.policy(agents, rng, explore=explore, learning=learn, kappa=kappa)
    result = outcome(rnd, online.step(rnd))
    online.learn(result)
    return result


def pretrain(method: Method, models: Sequence[str], rng: np.random.Generator,
             rounds: int = 300, workload_pct: float = 100.0,
             kappa: float = KAPPA, n_partitions: int | None = None) -> QAgent:
    """Offline pre-training (§IV-B: "The RL is initially pre-trained and distributed to each
    edge node"): one shared Q-table learns from every agent's decisions, exploring, on a fresh
    `pretraining_network` (§V-A's "RL Training" ranges, 2–10 nodes) each round; it is then
    copied to every node. Jobs as in :func:`rounds.random_round` (``n_partitions``)."""
    shared = QAgent()
    for k in range(rounds):
        net = pretraining_network(rng)
        rnd = random_round(net, models[k % len(models)], workload_pct, rng, n_partitions)
        play_round(method, rnd, [shared] * net.n, rng, kappa=kappa)
    return shared
