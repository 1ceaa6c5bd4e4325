"""SROLE's placement problem as a PettingZoo parallel environment: one agent per edge node."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.agents import AVAIL_MAX, CPU_DEMAND_MAX, MEM_DEMAND_MAX_MB, level
from edgewise.modelparallel.jobs import max_levels
from edgewise.modelparallel.network import CLUSTER_SIZE
from edgewise.modelparallel.policies import shielded
from edgewise.modelparallel.problem import CPU, MEM, NET, EdgeNetwork, TaskPlacement
from edgewise.modelparallel.rounds import KAPPA, outcome, random_round, rewards
from edgewise.modelparallel.schedule import Decision, Round
from edgewise.modelparallel.shields import SHIELDS

try:  # the optional extra `edgewise[rl-env]`
    from gymnasium import spaces
    from pettingzoo import ParallelEnv
except ModuleNotFoundError as missing:  # pragma: no cover (installed in the dev env)
    raise ModuleNotFoundError(f"edgewise.modelparallel.env needs {missing.name}: pip install "
                              "'edgewise[rl-env]'", name=missing.name) from missing

__all__ = ["SroleEnv"]


class SroleEnv(ParallelEnv):  # type: ignore[misc]
    """Each step is a scheduling round (§IV-B): the nodes that initiated a job this round
    place its partitions among themselves and their neighbours; the shield (§IV-C/D), if any,
    corrects the joint action; each agent is rewarded −κ per corrected partition and −γ
    (invalid schedule: memory above capacity) or ρ/√JCT for its job. The episode is
    ``max_rounds`` rounds; each round is independent (a failed job is not carried over).

    A job has one partition per model level (§III), or ``n_partitions`` FLOP-balanced groups
    of levels; the spaces have ``n_slots`` partition slots, the largest model's count (16,
    VGG-16's levels), whatever the model, so that agents trained on one model fit another.

    Observation (MultiDiscrete): whether the agent has a job; per partition slot its CPU and
    memory demand levels (3 = no partition); per candidate slot (itself, then neighbours) its
    available-CPU level (0 none, 1 low, 2 medium, 3 high; 4 = no candidate), memory level
    used (0..2; 3 = no candidate) and bandwidth utilisation level (0..2 up to α, 3 above α;
    4 = no candidate). Action (MultiDiscrete): per partition the candidate slot, taken modulo
    the number of candidates. ``infos`` carry collisions, JCTs and failed runs.
    """

    metadata = {"name": "srole_v0", "render_modes": []}  # noqa: RUF012 (PettingZoo API)

    def __init__(self, network: EdgeNetwork, model: str = "vgg-16", workload_pct: float = 100.0,
                 shield: str = "none", kappa: float = KAPPA, max_rounds: int = 10,
                 n_partitions: int | None = None) -> None:
        if shield != "none":
            SHIELDS.get(shield)  # ConfigError naming the known shields

        self.network, self.model, self.workload_pct = network, model, workload_pct
        self.shield = None if shield == "none" else shield
        self.kappa, self.max_rounds = kappa, max_rounds
        self.n_partitions = n_partitions
        self.n_slots = max_levels(n_partitions)
        self.possible_agents = [d.name for d in network.nodes]
        self.agents: list[str] = []
        self._index = {a: j for j, a in enumerate(self.possible_agents)}
        self._rng = np.random.default_rng()
        self._round: Round | None = None
        self._t = 0

    @functools.cache  # noqa: B019 (one space object per agent, as the API wants)
    def observation_space(self, agent: str) -> spaces.MultiDiscrete:
        return spaces.MultiDiscrete([2] + [4, 4] * self.n_slots + [5, 4, 5] * CLUSTER_SIZE)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.MultiDiscrete:
        return spaces.MultiDiscrete([CLUSTER_SIZE] * self.n_slots)

    def _observe(self, j: int) -> NDArray[np.int64]:
        assert self._round is not None
        job = next((x for x in self._round.jobs if x.origin == j), None)
        obs = [int(job is not None)]
        for i in range(self.n_slots):
            if job is not None and i < len(job.partitions):
                p = job.partitions[i]
                obs += [level(p.cpu, CPU_DEMAND_MAX), level(p.memory_mb, MEM_DEMAND_MAX_MB)]
            else:
                obs += [3, 3]
        load, cap = self._round.base_load(), self.network.capacity()
        cands = self.network.candidates(j)
        for s in range(CLUSTER_SIZE):
            if s < len(cands):
                k = cands[s]
                alpha = self._round.alpha
                avail = alpha * cap[k, CPU] - load[k, CPU]
                u_net = load[k, NET] / cap[k, NET]
                obs += [1 + level(avail, AVAIL_MAX) if avail > 0 else 0,
                        level(load[k, MEM] / cap[k, MEM], 1.0),
                        level(u_net, alpha) if u_net <= alpha else 3]
            else:
                obs += [4, 3, 4]
        return np.asarray(obs, dtype=np.int64)

    def _observations(self) -> dict[str, NDArray[np.int64]]:
        return {a: self._observe(self._index[a]) for a in self.agents}

    def reset(self, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._t = 0
        self._round = random_round(self.network, self.model, self.workload_pct, self._rng,
                                   self.n_partitions)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float],
                                                     dict[str, bool], dict[str, bool],
                                                     dict[str, Any]]:
        assert self._round is not None
        rnd = self._round
        places = []
        for job in rnd.jobs:
            cands = self.network.candidates(job.origin)
            act = np.asarray(actions.get(self.possible_agents[job.origin],
                                         np.zeros(self.n_slots, dtype=np.int64)))
            places.append(TaskPlacement(tuple(cands[int(act[i]) % len(cands)]
                                          for i in range(len(job.partitions)))))
        dec = shielded(Decision(tuple(places), tuple(j.origin for j in rnd.jobs), (), 0, 0.0),
                       rnd, self.shield)
        res = outcome(rnd, dec)
        reward = dict.fromkeys(self.agents, 0.0)
        for job, r in zip(rnd.jobs, rewards(res, rnd, dec, self.kappa), strict=True):
            reward[self.possible_agents[job.origin]] += float(sum(r))
        info = {"collisions": res.collisions, "unsafe": res.unsafe, "corrected": res.corrected,
                "jct_s": dict(zip((j.name for j in rnd.jobs), res.jct_s, strict=True)),
                "failed": dict(zip((j.name for j in rnd.jobs), res.failed, strict=True))}
        self._t += 1
        done = self._t >= self.max_rounds
        self._round = random_round(self.network, self.model, self.workload_pct, self._rng,
                                   self.n_partitions)
        obs = self._observations()
        out = (obs, reward, dict.fromkeys(self.agents, False), dict.fromkeys(self.agents, done),
               {a: dict(info) for a in self.agents})
        if done:
            self.agents = []
        return out
