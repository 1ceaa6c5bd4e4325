"""Deep-Edge on the paper's testbed file with calibrated device models, and a real run."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import cluster_from_dict, load_cluster
from edgewise.runtime.plan import TrainConfig
from edgewise.runtime.ray_cluster import start_local
from edgewise.update.policies import get_policy
from edgewise.update.run import cluster_problem, execute, to_train_plan
from edgewise.update.sim import score
from tests.clusters import TWO_NANOS_SIFT

TESTBED = example_path("deep-edge-testbed.yaml")
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("loaded", [(65.0, 75.0, 30.0), (60.0, 70.0, 30.0)])
def test_a_heavily_loaded_device_is_dropped_or_shrunk_and_deadlines_hold(loaded: tuple) -> None:
    cluster = load_cluster(TESTBED)
    idle_plan = get_policy("deep-edge")(cluster_problem(cluster, {}, 3855), RNG)
    problem = cluster_problem(cluster, {"nano-2": loaded}, 3855)
    plan = get_policy("deep-edge")(problem, RNG)
    shrunk = plan.batch_sizes.get("nano-2", 0) < idle_plan.batch_sizes["nano-2"]
    assert "nano-2" not in plan.workers or shrunk
    assert plan.shards.get("nano-2", 0) < idle_plan.shards["nano-2"]
    assert score(problem, plan).violations == ()
    fair = get_policy("fair")(problem, RNG)
    assert "sift-nano-2" in score(problem, fair).violations


def test_the_plan_becomes_an_engine_plan_over_the_digits() -> None:
    cluster = load_cluster(TESTBED)
    plan = get_policy("deep-edge")(cluster_problem(cluster, {"nano-2": (65, 75, 30)}, 3855), RNG)
    train_plan = to_train_plan(cluster, plan, 1437)
    assert sum(train_plan.shards.values()) == 1437
    assert set(train_plan.workers) == set(plan.workers)
    assert train_plan.ps_device == "pi-ps" and train_plan.store_device == "pi-store"
    ratio = train_plan.shards["tx2-0"] / train_plan.shards["nano-0"]
    assert ratio == pytest.approx(plan.shards["tx2-0"] / plan.shards["nano-0"], rel=0.01)


@pytest.mark.ray
def test_a_plan_runs_with_its_background_apps_really_running() -> None:
    cluster = cluster_from_dict(TWO_NANOS_SIFT, source="test")
    problem = cluster_problem(cluster, {}, 1437)
    plan = get_policy("deep-edge")(problem, RNG)
    runtime = start_local(cluster)
    try:
        done = execute(runtime, problem, plan, config=TrainConfig(epochs=1, heartbeat_s=0.5))
    finally:
        runtime.shutdown()
    assert len(done.result.epochs) == 1
    (app,) = done.apps
    assert app["app"] == "sift-0" and app["periods"] >= 3 and app["frames_received"] >= 1
    assert 0 < app["exec_ms_p50"] < 1000
