"""Tabular Q-learning agents over discretised states (§IV-B), saved as JSON (no pickle).

A decision places one partition: the state is (the partition's CPU demand level, the slot of
the previous partition's host, and for each candidate node its available-CPU level and
whether the partition fits its memory); the action is a slot in the candidate list.
Levels are three equal-width ranges: low, medium, high (§IV-B).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.modelparallel.problem import ALPHA, EdgeNetwork, Partition

__all__ = ["QAgent", "Step", "encode_state", "level", "load_agents", "save_agents"]

CPU_DEMAND_MAX = 0.2  # host ratio: a partition's CPU demand levels span [0, 0.2]
MEM_DEMAND_MAX_MB = 600.0
AVAIL_MAX = ALPHA  # available CPU (host ratio below α) levels span [0, α]
FORMAT = "edgewise-srole-qtables/1"


def level(value: float, top: float) -> int:
    """0, 1 or 2 (low, medium, high): three equal-width ranges over [0, top]; clipped."""
    return int(min(2, max(0, np.floor(3.0 * value / top)))) if top > 0 else 0


def encode_state(part: Partition, prev_slot: int, cands: Sequence[int],
                 network: EdgeNetwork, load: NDArray[np.float64],
                 alpha: float = ALPHA) -> str:
    """The discretised state of one placement decision, as a compact string key."""
    cap = network.capacity()
    cells = []
    for k in cands:
        avail = alpha * cap[k, 0] - load[k, 0]
        fits = load[k, 1] + part.memory_mb <= alpha * cap[k, 1]
        cells.append(f"{level(avail, AVAIL_MAX) if avail > 0 else 'x'}{'m' if fits else 'o'}")
    return f"{level(part.cpu, CPU_DEMAND_MAX)}|{prev_slot}|{''.join(cells)}"


@dataclass(frozen=True, slots=True)
class Step:
    """One decision an agent took: the state, the action (slot) and the next state."""

    state: str
    action: int
    n_actions: int


@dataclass(slots=True)
class QAgent:
    """A Q-learning agent: Q(s, a) in a dict of lists; ε-greedy; learning rate ``lr``;
    undiscounted within a job's placement (the reward comes when the job is scored)."""

    lr: float = 0.2
    epsilon: float = 0.1
    q: dict[str, list[float]] = field(default_factory=dict)

    def values(self, state: str, n_actions: int) -> list[float]:
        row = self.q.setdefault(state, [0.0] * n_actions)
        if len(row) < n_actions:
            row.extend([0.0] * (n_actions - len(row)))
        return row

    def act(self, state: str, n_actions: int, rng: np.random.Generator, explore: bool) -> int:
        """ε-greedy over the first ``n_actions`` slots; ties go to the lowest slot."""
        if explore and rng.random() < self.epsilon:
            return int(rng.integers(n_actions))
        return int(np.argmax(self.values(state, n_actions)[:n_actions]))

    def learn(self, steps: Sequence[Step], rewards: Sequence[float]) -> None:
        """Q-learning backup along one job's decisions: r_t + max_a Q(s_{t+1}, a)."""
        for t in reversed(range(len(steps))):
            s = steps[t]
            nxt = (max(self.values(steps[t + 1].state, steps[t + 1].n_actions))
                   if t + 1 < len(steps) else 0.0)
            row = self.values(s.state, s.n_actions)
            row[s.action] += self.lr * (rewards[t] + nxt - row[s.action])

    def copy(self) -> QAgent:
        return QAgent(self.lr, self.epsilon, {k: list(v) for k, v in self.q.items()})


def save_agents(path: Path, method: str, agents: Sequence[QAgent]) -> None:
    """Write the agents' Q-tables as JSON."""
    doc = {"format": FORMAT, "method": method,
           "agents": [{"lr": a.lr, "epsilon": a.epsilon, "q": a.q} for a in agents]}
    path.write_text(json.dumps(doc, sort_keys=True))


def load_agents(path: Path) -> tuple[str, list[QAgent]]:
    """Read agents written by `save_agents`; ConfigError names a bad or foreign file."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read agents: {exc}", source=str(path)) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ConfigError(f"not an {FORMAT} file", source=str(path), field="format")
    agents = [QAgent(float(a["lr"]), float(a["epsilon"]),
                     {str(k): [float(x) for x in v] for k, v in a["q"].items()})
              for a in doc["agents"]]
    return str(doc["method"]), agents
