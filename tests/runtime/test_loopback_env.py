"""An emulated run keeps its Ray on loopback through the environment; the Ray processes of
a real cluster started afterwards from the same process (a testbed's ``ray start`` per
device), or from a command it runs, must not inherit that setting."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import ray._private.ray_constants as ray_constants

from edgewise.runtime.local_instance import (
    LOOPBACK_RAY_ENV,
    LOOPBACK_SET_ENV,
    loopback_only,
    reachable_again,
    without_loopback,
)
from edgewise.testbed.nodes import node_env

KEYS = (*LOOPBACK_RAY_ENV, LOOPBACK_SET_ENV)
METRICS = next(k for k in LOOPBACK_RAY_ENV if k.lower() == "ray_enable_metrics_collection")


@pytest.fixture
def clean_env() -> Iterator[None]:
    """This process's loopback setting (the session's shared instance may have made it),
    put back after the test."""
    saved = {k: os.environ.get(k) for k in KEYS}
    constant = ray_constants.ENABLE_RAY_CLUSTER
    for key in KEYS:
        os.environ.pop(key, None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    ray_constants.ENABLE_RAY_CLUSTER = constant


def test_a_testbeds_nodes_do_not_inherit_the_emulations_loopback(clean_env: None) -> None:
    loopback_only()  # as an emulated run in this process does
    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert ray_constants.ENABLE_RAY_CLUSTER is False

    env = node_env("/nonexistent/token")

    assert not set(KEYS) & set(env)
    assert env["RAY_AUTH_MODE"] == "token"
    # a command run from here inherits the marker, so it knows the setting is not the user's
    child = dict(os.environ)
    assert not set(KEYS) & set(without_loopback(child))
    reachable_again()
    assert not set(KEYS) & set(os.environ) and ray_constants.ENABLE_RAY_CLUSTER is True


def test_a_users_own_setting_stays(clean_env: None) -> None:
    os.environ[METRICS] = "0"  # the user's, before any run

    loopback_only()

    assert os.environ[LOOPBACK_SET_ENV] == "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
    assert node_env("/nonexistent/token")[METRICS] == "0"
    reachable_again()
    assert os.environ[METRICS] == "0"
