"""The PettingZoo environment, the methods' rounds, pre-training, saving and determinism."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from edgewise.errors import ConfigError
from edgewise.modelparallel.agents import QAgent, Step, load_agents, save_agents
from edgewise.modelparallel.env import SroleEnv
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.sim import play_round, pretrain, random_round


def test_env_passes_the_parallel_api_test() -> None:
    env = SroleEnv(random_network(10, np.random.default_rng(0)), model="rnn",
                   shield="decentralized", max_rounds=4)
    parallel_api_test(env, num_cycles=12)
    # one action per model level of the largest model (VGG-16: 16), whatever the env's model
    assert env.action_space(env.possible_agents[0]).shape == (16,)
    assert env.observation_space(env.possible_agents[0]).shape == (1 + 2 * 16 + 2 * 5,)


def test_env_same_seed_same_numbers_and_shield_penalises() -> None:
    def episode(shield: str) -> list[tuple[dict[str, float], int]]:
        env = SroleEnv(random_network(10, np.random.default_rng(1)), model="vgg-16",
                       shield=shield, max_rounds=3)
        env.reset(seed=5)
        out = []
        while env.agents:
            acts = {a: np.zeros(env.n_slots, dtype=np.int64) for a in env.agents}  # on itself
            _, rew, _, _, info = env.step(acts)
            out.append((rew, info[env.possible_agents[0]]["corrected"]))
        return out

    assert episode("centralized") == episode("centralized")
    plain, shielded = episode("none"), episode("centralized")
    assert all(c == 0 for _, c in plain)
    for (r0, _), (r1, c1) in zip(plain, shielded, strict=True):
        if c1:  # a corrected partition costs its agent κ = 100
            assert min(r1.values()) <= -100 + 1.0 < min(r0.values())


def test_unknown_shield_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="shield"):
        SroleEnv(random_network(5, np.random.default_rng(0)), shield="magic")


@pytest.mark.parametrize("name", ["rl", "marl", "srole-c", "srole-d"])
def test_methods_are_deterministic_from_a_seed(name: str) -> None:
    def run() -> list[float]:
        rng = np.random.default_rng(11)
        method = get_method(name)
        base = pretrain(method, ["rnn"], rng, rounds=10)
        net = random_network(10, rng)
        agents = [base.copy() for _ in range(net.n)]
        return [x for _ in range(5)
                for x in play_round(method, random_round(net, "rnn", 80, rng), agents, rng).jct_s]

    assert run() == run()


def test_shielded_methods_leave_fewer_overloaded_nodes() -> None:
    rng = np.random.default_rng(3)
    net = random_network(15, rng)
    agents = [QAgent(epsilon=1.0) for _ in range(net.n)]  # random placements
    for name, most in (("marl", None), ("srole-c", 0)):
        rounds = [random_round(net, "vgg-16", 100, np.random.default_rng(k)) for k in range(8)]
        res = [play_round(get_method(name), r, agents, np.random.default_rng(0), learn=False)
               for r in rounds]
        over = [r.overloaded_after for r in res]
        unsafe = [r.unsafe for r in res]
        if most is None:
            assert sum(unsafe) > 0
        else:
            assert sum(over) < sum(unsafe)


def test_agents_round_trip_through_json(tmp_path: Path) -> None:
    a = QAgent(lr=0.5, epsilon=0.0)
    a.learn([Step("s0", 1, 3), Step("s1", 0, 3)], [0.0, 2.0])
    assert a.q["s1"] == [1.0, 0.0, 0.0] and a.q["s0"] == [0.0, 0.5, 0.0]
    save_agents(tmp_path / "q.json", "srole-c", [a, QAgent()])
    method, back = load_agents(tmp_path / "q.json")
    assert method == "srole-c" and back[0].q == a.q and back[1].q == {}
    (tmp_path / "bad.json").write_text("{\"format\": \"other\"}")
    with pytest.raises(ConfigError, match="format"):
        load_agents(tmp_path / "bad.json")


def test_unknown_method_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="srole-c"):
        get_method("magic")
