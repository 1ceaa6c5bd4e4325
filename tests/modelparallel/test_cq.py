"""CQ-learning (De Hauwere et al., AAMAS 2010): independent learning, a state marked where
the others' actions change the returns (Welch's t-test against SciPy), joint keys only
there; copies share rows until written; saved as JSON."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from edgewise.errors import ConfigError
from edgewise.modelparallel.agentfile import load_agents, save_agents
from edgewise.modelparallel.agents import QAgent, Step
from edgewise.modelparallel.cq import CQAgent, welch_p
from edgewise.modelparallel.policies import get_method


def _summary(xs: list[float]) -> list[float]:
    return [float(len(xs)), float(np.mean(xs)), float(np.sum((np.array(xs) - np.mean(xs)) ** 2))]


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-60, 2), min_size=2, max_size=30),
       st.lists(st.floats(-60, 2), min_size=2, max_size=30))
def test_welch_p_is_scipys_two_sided_welch_test(a: list[float], b: list[float]) -> None:
    if np.var(a) == 0 or np.var(b) == 0:
        return
    want = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert welch_p(_summary(a), _summary(b)) == pytest.approx(want, rel=1e-6, abs=1e-12)


def _teach(agent: CQAgent, state: str, returns: list[float], disturbed: bool) -> None:
    for r in returns:
        agent.learn([Step(state, 0, 2)], [r], [disturbed])


def test_a_state_is_marked_only_where_others_change_the_return() -> None:
    agent = CQAgent(min_samples=10)
    rng = np.random.default_rng(0)
    quiet = list(0.05 + 0.01 * rng.standard_normal(10))
    _teach(agent, "s", quiet, disturbed=False)
    _teach(agent, "s", [-50.0, *quiet[:4], -50.0, -50.0, -50.0, 0.05], disturbed=True)
    assert "s" not in agent.marked  # 9 disturbed returns: not yet tested
    _teach(agent, "s", [-50.0], disturbed=True)  # half of them collided (−γ): significant
    assert "s" in agent.marked
    assert welch_p(agent.returns["s"][:3], agent.returns["s"][3:]) < 0.05
    _teach(agent, "t", quiet, disturbed=False)
    _teach(agent, "t", quiet, disturbed=True)  # the same returns: no coordination needed
    assert "t" not in agent.marked


def test_joint_keys_only_in_marked_states_and_start_from_the_local_values() -> None:
    agent = CQAgent()
    agent.q["s"] = [0.3, 0.1]
    assert agent.key("s", "010") == "s"
    agent.marked.add("s")
    key = agent.key("s", "010")
    assert key == "s#010" and agent.values(key, 2) == [0.3, 0.1]
    agent.learn([Step(key, 1, 2, local="s")], [1.0], [True])
    assert agent.q["s"] == [0.3, 0.1] and agent.q[key][1] == pytest.approx(0.1 + 0.2 * 0.9)
    assert QAgent().key("s", "010") == "s"  # an independent learner never looks


def test_copies_share_rows_until_they_write_one() -> None:
    base = CQAgent()
    base.learn([Step("s", 0, 2)], [1.0], [False])
    copy = base.copy()
    copy.learn([Step("s", 0, 2)], [1.0], [True])
    assert base.q["s"] == [0.2, 0.0] and copy.q["s"] == [pytest.approx(0.36), 0.0]
    assert base.returns["s"][3] == 0 and copy.returns["s"][3] == 1


def test_agents_of_both_kinds_round_trip_through_json(tmp_path: Path) -> None:
    a, c = QAgent(lr=0.5, epsilon=0.0), CQAgent(min_samples=3)
    a.learn([Step("s0", 1, 3), Step("s1", 0, 3)], [0.0, 2.0])
    assert a.q["s1"] == [1.0, 0.0, 0.0] and a.q["s0"] == [0.0, 0.5, 0.0]
    _teach(c, "s", [1.0, 1.0, 1.0], False)
    _teach(c, "s", [-9.0, -9.0, -9.0], True)
    save_agents(tmp_path / "q.json", "marl", [a, c])
    method, (a2, c2) = load_agents(tmp_path / "q.json")
    assert method == "marl" and a2.q == a.q and type(a2) is QAgent
    assert isinstance(c2, CQAgent) and c2.q == c.q and c2.marked == {"s"} == c.marked
    assert c2.returns == c.returns and c2.min_samples == 3
    (tmp_path / "bad.json").write_text("{\"format\": \"other\"}")
    with pytest.raises(ConfigError, match="format"):
        load_agents(tmp_path / "bad.json")


def test_marl_is_cq_learning_and_iql_the_independent_learner() -> None:
    assert isinstance(get_method("marl").new_agent(), CQAgent)
    assert type(get_method("iql").new_agent()) is QAgent
    assert isinstance(get_method("srole-c").new_agent(), CQAgent)  # SROLE runs on MARL
