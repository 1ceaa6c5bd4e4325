"""Offline pre-training of a method's agents (§IV-B, §V-A "RL Training") and one round of
play: decide, shield, run, reward, learn."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.network import pretraining_network
from edgewise.modelparallel.policies import Method
from edgewise.modelparallel.rounds import KAPPA, Conditions, RoundResult, outcome, random_round
from edgewise.modelparallel.schedule import Round
from edgewise.modelparallel.workloads import ModelRef

__all__ = ["play_round", "pretrain"]


def play_round(method: Method, rnd: Round, agents: Sequence[QAgent], rng: np.random.Generator,
               *, explore: bool = True, learn: bool = True,
               kappa: float = KAPPA) -> RoundResult:
    """One round of ``method``'s agents: decide (§IV-B), shield (§IV-C/D), run every job,
    reward and learn."""
    online = method.policy(agents, rng, explore=explore, learning=learn, kappa=kappa)
    result = outcome(rnd, online.step(rnd))
    online.learn(result)
    return result


def pretrain(method: Method, models: Sequence[ModelRef], rng: np.random.Generator,
             rounds: int = 300, workload_pct: float = 100.0, kappa: float = KAPPA,
             n_partitions: int | None = None, conditions: Conditions | None = None) -> QAgent:
    """Offline pre-training (§IV-B: "The RL is initially pre-trained and distributed to each
    edge node"): one shared agent (``method.new_agent``) learns from every agent's
    decisions, exploring, on a fresh `pretraining_network` (§V-A's "RL Training" ranges,
    2–10 nodes) each round, under ``conditions``; it is then copied to every node. Jobs as
    in :func:`rounds.random_round` (``n_partitions``)."""
    shared = method.new_agent()
    for k in range(rounds):
        net = pretraining_network(rng)
        rnd = random_round(net, models[k % len(models)], workload_pct, rng, n_partitions,
                           conditions)
        play_round(method, rnd, [shared] * net.n, rng, kappa=kappa)
    return shared
