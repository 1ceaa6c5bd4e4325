"""Trained agents saved as JSON (no pickle): Q-tables and, for CQ-learning agents, their
marked states and return statistics."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgewise.errors import ConfigError
from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.cq import CQAgent

__all__ = ["FORMAT", "load_agents", "save_agents"]

FORMAT = "edgewise-srole-agents/2"
_OLD = "edgewise-srole-qtables/1"  # independent Q-learners only; still read


def _doc(agent: QAgent) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": "q", "lr": agent.lr, "epsilon": agent.epsilon, "q": agent.q}
    if isinstance(agent, CQAgent):
        doc |= {"kind": "cq", "significance": agent.significance,
                "min_samples": agent.min_samples, "marked": sorted(agent.marked),
                "returns": agent.returns}
    return doc


def save_agents(path: Path, method: str, agents: Sequence[QAgent]) -> None:
    """Write the agents as JSON."""
    doc = {"format": FORMAT, "method": method, "agents": [_doc(a) for a in agents]}
    path.write_text(json.dumps(doc, sort_keys=True))


def _agent(a: dict[str, Any]) -> QAgent:
    q = {str(k): [float(x) for x in v] for k, v in a["q"].items()}
    if a.get("kind", "q") == "q":
        return QAgent(lr=float(a["lr"]), epsilon=float(a["epsilon"]), q=q)
    return CQAgent(lr=float(a["lr"]), epsilon=float(a["epsilon"]), q=q,
                   significance=float(a["significance"]), min_samples=int(a["min_samples"]),
                   marked={str(s) for s in a["marked"]},
                   returns={str(k): [float(x) for x in v] for k, v in a["returns"].items()})


def load_agents(path: Path) -> tuple[str, list[QAgent]]:
    """Read agents written by `save_agents`; ConfigError names a bad or foreign file."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read agents: {exc}", source=str(path)) from exc
    if not isinstance(doc, dict) or doc.get("format") not in (FORMAT, _OLD):
        raise ConfigError(f"not an {FORMAT} file", source=str(path), field="format")
    try:
        return str(doc["method"]), [_agent(a) for a in doc["agents"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"malformed agents: {exc!r}", source=str(path),
                          field="agents") from exc
