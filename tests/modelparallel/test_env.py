"""The PettingZoo environment (the optional extra edgewise[rl-env]): the parallel API, same
seed same numbers, the shield's penalty."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.errors import ConfigError
from edgewise.modelparallel.env import SroleEnv
from edgewise.modelparallel.network import random_network

# PettingZoo is the optional extra edgewise[rl-env], installed with the dev extra: the test
# environment has it, so a failing import here is a failure, not a skip.


def test_env_passes_the_parallel_api_test() -> None:
    from pettingzoo.test import parallel_api_test

    env = SroleEnv(random_network(10, np.random.default_rng(0)), model="rnn",
                   shield="decentralized", max_rounds=4)
    parallel_api_test(env, num_cycles=12)
    # one action per model level of the largest model (VGG-16: 16), whatever the env's model
    assert env.action_space(env.possible_agents[0]).shape == (16,)
    assert env.observation_space(env.possible_agents[0]).shape == (1 + 2 * 16 + 3 * 5,)


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
