"""Tabular Q-learning agents over discretised states (§IV-B).

A decision places one partition: the state is (the partition's CPU demand level, the slot of
the previous partition's host, and for each candidate node its available-CPU level, whether
the partition fits its memory, and its bandwidth-utilisation level: §IV-B's state "includes
the utilization of the CPU, memory and bandwidth resource for each device"); the action is
a slot in the candidate list. Levels are three equal-width ranges: low, medium, high (§IV-B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from edgewise.modelparallel.problem import (
    ALPHA,
    CPU,
    MEM,
    NET,
    EdgeNetwork,
    EdgeNode,
    Partition,
)

__all__ = ["AVAIL_MAX", "CPU_DEMAND_MAX", "MEM_DEMAND_MAX_MB", "QAgent", "Step",
           "bandwidth_in_state", "encode_state", "level"]

CPU_DEMAND_MAX = 0.2  # host ratio: a partition's CPU demand levels span [0, 0.2]
MEM_DEMAND_MAX_MB = 600.0
AVAIL_MAX = ALPHA  # available CPU (host ratio below α) levels span [0, α]


def level(value: float, top: float) -> int:
    """0, 1 or 2 (low, medium, high): three equal-width ranges over [0, top]; clipped."""
    return min(2, max(0, math.floor(3.0 * value / top))) if top > 0 else 0


def encode_state(part: Partition, prev_slot: int, cands: Sequence[int],
                 network: EdgeNetwork, load: NDArray[np.float64],
                 alpha: float = ALPHA) -> str:
    """The discretised state of one placement decision, as a compact string key: per
    candidate its available CPU below α (level, or x for none), whether the partition fits
    its memory below α (m or o) and its bandwidth utilisation (level of [0, α], or x
    above α)."""
    caps = network.capacity()[list(cands)].tolist()
    loads = load[list(cands)].tolist()
    cells = []
    for cap, used in zip(caps, loads, strict=True):
        avail = alpha * cap[CPU] - used[CPU]
        fits = used[MEM] + part.memory_mb <= alpha * cap[MEM]
        u_net = used[NET] / cap[NET]
        cells.append(f"{level(avail, AVAIL_MAX) if avail > 0 else 'x'}{'m' if fits else 'o'}"
                     f"{level(u_net, alpha) if u_net <= alpha else 'x'}")
    return f"{level(part.cpu, CPU_DEMAND_MAX)}|{prev_slot}|{''.join(cells)}"


def bandwidth_in_state() -> bool:
    """Whether the agents see bandwidth: two decisions that differ only in a candidate's
    bandwidth utilisation (idle link or one at 90 %) get different states."""
    network = EdgeNetwork((EdgeNode("a", 1.0, 1000.0, 100.0), EdgeNode("b", 1.0, 1000.0, 100.0)))
    part = Partition("p", 1.0, 0.1, 10.0, 1.0, 1.0)
    idle = np.zeros((2, 3))
    busy = idle.copy()
    busy[1, NET] = 90.0
    return encode_state(part, 0, (0, 1), network, idle) != encode_state(
        part, 0, (0, 1), network, busy)


@dataclass(frozen=True, slots=True)
class Step:
    """One decision an agent took: the key it looked up (its state, or its state joined
    with the other agents' where it coordinates), the action (slot), the number of actions,
    and the local state alone (``local``; empty: the same as ``state``)."""

    state: str
    action: int
    n_actions: int
    local: str = ""


@dataclass(slots=True)
class QAgent:
    """A Q-learning agent: Q(s, a) in a dict of lists; ε-greedy; learning rate ``lr``;
    undiscounted within a job's placement (the reward comes when the job is scored). It
    learns independently of the other agents (``iql``): it never looks at their state.
    A copy shares its rows with the original until it writes one (``shared``)."""

    lr: float = 0.2
    epsilon: float = 0.1
    q: dict[str, list[float]] = field(default_factory=dict)
    shared: set[str] = field(default_factory=set, repr=False, compare=False)

    def key(self, state: str, context: str) -> str:
        """The Q-table key of ``state``: the state alone (``context``, the other agents'
        state, is ignored by an independent learner)."""
        return state

    def values(self, state: str, n_actions: int) -> list[float]:
        """The row of ``state``, at least ``n_actions`` long (read only: see ``_row``)."""
        row = self.q.get(state)
        if row is None or len(row) < n_actions:
            return QAgent._row(self, state, n_actions)
        return row

    def _row(self, state: str, n_actions: int) -> list[float]:
        """The row of ``state`` to write to: created, lengthened or unshared as needed."""
        row = self.q.get(state)
        if row is None or len(row) < n_actions or state in self.shared:
            row = [*(row or ()), *([0.0] * (n_actions - len(row or ())))]
            self.q[state] = row
            self.shared.discard(state)
        return row

    def act(self, state: str, n_actions: int, rng: np.random.Generator, explore: bool) -> int:
        """ε-greedy over the first ``n_actions`` slots; ties go to the lowest slot."""
        if explore and rng.random() < self.epsilon:
            return int(rng.integers(n_actions))
        return int(np.argmax(self.values(state, n_actions)[:n_actions]))

    def learn(self, steps: Sequence[Step], rewards: Sequence[float],
              disturbed: Sequence[bool] = ()) -> None:
        """Q-learning backup along one job's decisions: r_t + max_a Q(s_{t+1}, a).
        ``disturbed`` (whether another agent acted on the same node) is not used here."""
        for t in reversed(range(len(steps))):
            s = steps[t]
            nxt = (max(self.values(steps[t + 1].state, steps[t + 1].n_actions))
                   if t + 1 < len(steps) else 0.0)
            row = self._row(s.state, s.n_actions)
            row[s.action] += self.lr * (rewards[t] + nxt - row[s.action])

    def copy(self) -> QAgent:
        """An agent with the same values; rows are copied when first written."""
        return QAgent(lr=self.lr, epsilon=self.epsilon, q=dict(self.q), shared=set(self.q))
