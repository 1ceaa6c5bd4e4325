"""CQ-learning (De Hauwere, Vrancx and Nowé, "Learning multi-agent state space
representations", AAMAS 2010; SROLE §V-B's MARL, [53]) for SROLE's placement agents.

An agent learns independently, on its own state, until it detects a state where the other
agents' actions change its reward: it keeps, per state, the returns of its decisions that
no other agent disturbed (no other agent's layer on the node it chose) and of those another
agent disturbed, and marks the state when Welch's t-test finds the two means different at
``significance``, with at least ``min_samples`` of each. Only in marked states does it
look up (and learn) Q-values on the joint state: its state augmented with the other
agents' state it can observe, here which of its candidate nodes are agents scheduling a job
of their own this round. A joint row starts from the local row's values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy import stats

from edgewise.modelparallel.agents import QAgent, Step

__all__ = ["CQ_MIN_SAMPLES", "CQ_SIGNIFICANCE", "CQAgent", "welch_p"]

CQ_SIGNIFICANCE = 0.05  # the t-test's level (our choice; the reference tests at a level)
CQ_MIN_SAMPLES = 10  # returns of each kind before a state is tested (our choice)
JOINT = "#"


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test from (n, mean, M2) summaries ``a`` and ``b``;
    1.0 when both are constant and equal, 0.0 when constant and different."""
    (n1, m1, s1), (n2, m2, s2) = a, b
    v1, v2 = s1 / (n1 - 1), s2 / (n2 - 1)
    if v1 == 0 and v2 == 0:
        return 1.0 if math.isclose(m1, m2) else 0.0
    p = stats.ttest_ind_from_stats(m1, math.sqrt(v1), n1, m2, math.sqrt(v2), n2,
                                   equal_var=False).pvalue
    return float(p)


@dataclass(slots=True)
class CQAgent(QAgent):
    """A CQ-learning agent (module docstring). ``marked``: the states where it coordinates;
    ``returns``: per state, (n, mean, M2) of undisturbed then disturbed returns."""

    significance: float = CQ_SIGNIFICANCE
    min_samples: int = CQ_MIN_SAMPLES
    marked: set[str] = field(default_factory=set)
    returns: dict[str, list[float]] = field(default_factory=dict)
    shared_returns: set[str] = field(default_factory=set, repr=False, compare=False)

    def key(self, state: str, context: str) -> str:
        """The joint key where ``state`` is marked, else the state alone."""
        return f"{state}{JOINT}{context}" if state in self.marked else state

    def _start_joint(self, state: str) -> None:
        """A new joint row starts from the local row's values."""
        if state not in self.q and JOINT in state:
            local = self.q.get(state.split(JOINT, 1)[0])
            if local is not None:
                self.q[state] = list(local)

    def values(self, state: str, n_actions: int) -> list[float]:
        self._start_joint(state)
        return QAgent.values(self, state, n_actions)

    def _row(self, state: str, n_actions: int) -> list[float]:
        self._start_joint(state)
        return QAgent._row(self, state, n_actions)

    def learn(self, steps: Sequence[Step], rewards: Sequence[float],
              disturbed: Sequence[bool] = ()) -> None:
        """The Q-learning backup, then the return of the job counted for each step's local
        state as disturbed or not, and the states whose returns now differ marked."""
        QAgent.learn(self, steps, rewards)
        total = float(sum(rewards))
        for step, hit in zip(steps, disturbed, strict=False):
            self._count(step.local or step.state, total, hit)

    def _count(self, state: str, value: float, disturbed: bool) -> None:
        row = self.returns.get(state)
        if row is None or state in self.shared_returns:
            row = list(row or [0.0] * 6)
            self.returns[state] = row
            self.shared_returns.discard(state)
        at = 3 if disturbed else 0
        row[at] += 1  # Welford's running mean and sum of squares
        delta = value - row[at + 1]
        row[at + 1] += delta / row[at]
        row[at + 2] += delta * (value - row[at + 1])
        if (state not in self.marked and row[0] >= self.min_samples
                and row[3] >= self.min_samples
                and welch_p(row[0:3], row[3:6]) < self.significance):
            self.marked.add(state)

    def copy(self) -> CQAgent:
        """An agent with the same values and statistics; rows copied when first written."""
        return CQAgent(lr=self.lr, epsilon=self.epsilon, q=dict(self.q), shared=set(self.q),
                       significance=self.significance, min_samples=self.min_samples,
                       marked=set(self.marked), returns=dict(self.returns),
                       shared_returns=set(self.returns))
