"""After a fault, an update re-plans through its own policy on the devices left (Deep-Edge
§IV-D re-triggers Algorithm 1), not with equal shards that ignore the apps' deadlines."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.runtime.plan import TrainPlan
from edgewise.update import cluster_problem, get_policy, to_train_plan
from edgewise.update.run import policy_replan

TESTBED = example_path("deep-edge-testbed.yaml")
LOADED = {"nano-2": (65.0, 75.0, 30.0)}  # the demo's loaded Nano: SIFT misses beside training


@pytest.mark.parametrize("policy", ["deep-edge", "fair"])
def test_the_replan_is_the_policys_plan_on_the_devices_left(policy: str) -> None:
    cluster = load_cluster(TESTBED)
    problem = cluster_problem(cluster, LOADED, 1437)
    first = to_train_plan(cluster, get_policy(policy)(problem, np.random.default_rng(0)), 1437)
    left = cluster.without(frozenset({"tx2-0"}))

    again = policy_replan(problem, policy)(left, 1437, first)

    assert isinstance(again, TrainPlan)
    assert "tx2-0" not in again.shards and sum(again.shards.values()) == 1437
    alone = cluster_problem(left, LOADED, 1437)
    expected = to_train_plan(left, get_policy(policy)(alone, np.random.default_rng(0)), 1437)
    assert dict(again.shards) == dict(expected.shards)
    assert dict(again.batch_sizes) == dict(expected.batch_sizes)
    again.validate(left, 1437)


def test_no_worker_left_is_a_clear_error() -> None:
    cluster = load_cluster(TESTBED)
    problem = cluster_problem(cluster, {}, 1437)
    workers = frozenset(w.device for w in problem.workers)

    with pytest.raises(ConfigError, match="no worker left"):
        policy_replan(problem, "deep-edge")(cluster.without(workers), 1437,
                                             TrainPlan({}, {}, "pi-ps", "pi-store", "x"))
