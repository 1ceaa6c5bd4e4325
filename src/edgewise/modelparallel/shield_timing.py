"""Wall-clock cost of the two shields on identical joint actions (SROLE §V-D, Fig. 7).

Each shield call takes tens of microseconds, so one timing is mostly noise on a shared
host. We time both shields on the same joint actions, repeat each call and keep the fastest
repetition (the least disturbed by other processes), then sum over the actions. The
centralized shield's time is its slowest cluster shield; the decentralized one's is its
slowest sub-shield or delegate, since they run at once on different nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import REGISTRY, get_method
from edgewise.modelparallel.problem import TaskPlacement
from edgewise.modelparallel.rounds import random_round
from edgewise.modelparallel.schedule import Round
from edgewise.modelparallel.shields import SHIELDS, Shield

__all__ = ["random_proposals", "shield_seconds"]


def random_proposals(rnd: Round, rng: np.random.Generator) -> tuple[TaskPlacement, ...]:
    """Every layer of every job on a uniformly drawn candidate of its job's origin (§IV-B:
    the origin itself or a neighbour): unshielded actions that overload some nodes."""
    out = []
    for job in rnd.jobs:
        hosts = rnd.network.candidates(job.origin)
        out.append(TaskPlacement(tuple(int(rng.choice(hosts)) for _ in job.partitions)))
    return tuple(out)


def _fastest(shield: Shield, rnd: Round, proposed: tuple[TaskPlacement, ...],
             repeats: int) -> float:
    base = rnd.base_load()
    return min(shield(rnd.network, rnd.jobs, proposed, base, rnd.alpha).seconds
               for _ in range(repeats))


def shield_seconds(models: Sequence[str], n_edges: int, rounds: int, seed: int,
                   repeats: int = 15, n_partitions: int | None = None) -> dict[str, float]:
    """Summed fastest-of-``repeats`` wall seconds of each shield over ``rounds`` random
    joint actions per model on one ``n_edges`` network at 100 % background workload (jobs
    as in `rounds.random_round`, ``n_partitions``); keyed by the shielded methods' names."""
    shields = {name: SHIELDS.get(kind) for name in REGISTRY.names()
               if (kind := get_method(name).shield) is not None}
    totals = dict.fromkeys(shields, 0.0)
    for m, model in enumerate(models):
        net = random_network(n_edges, np.random.default_rng([seed, n_edges, m, 7]))
        gen = np.random.default_rng([seed, n_edges, m, 8])
        for _ in range(rounds):
            rnd = random_round(net, model, 100.0, gen, n_partitions)
            proposed = random_proposals(rnd, gen)
            for name, fn in shields.items():
                totals[name] += _fastest(fn, rnd, proposed, repeats)
    return totals
