"""An 8-node testbed (root) serving a small transformer of the ViT-Large class, each stage
loading only its slice from the weight shards: every request answered once, in order,
equal to the whole model; each stage's memory read from its node's cgroup, whose limit is
its device's memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from edgewise.nn.large import LargeModel, large_spec, prepare
from edgewise.pipeline.scale import serve, whole_model_outputs
from edgewise.pipeline.scale_run import plan_on, setup
from edgewise.pipeline.workload import random_inputs
from edgewise.testbed import session
from tests.testbed.conftest import require_testbed_host

pytestmark = [pytest.mark.ray, pytest.mark.system]
NAME = "pytest-large8"
SUBNET = "10.127.28.0/24"  # apart from the other testbed tests' default subnet
CLUSTER = {
    "name": "large-eight",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.2},
    "devices": [*({"name": f"pi-{i}", "type": "raspberry-pi-4-2gb"} for i in range(7)),
                {"name": "gateway", "type": "raspberry-pi-5", "roles": ["manager"]}],
}
SMALL = {"hidden_size": 32, "num_hidden_layers": 6, "num_attention_heads": 4,
         "intermediate_size": 64, "image_size": 16, "patch_size": 8, "num_labels": 5}


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[session.Testbed]:
    require_testbed_host()
    path = tmp_path_factory.mktemp("large8") / "large-eight.yaml"
    path.write_text(yaml.safe_dump(CLUSTER))
    with session.testbed(path, NAME, subnet=SUBNET, state=tmp_path_factory.mktemp("state"),
                         fresh=True) as tb:
        yield tb


def test_a_small_transformer_over_seven_stages_answers_every_request_once(
        eight: session.Testbed, tmp_path: Path) -> None:
    lm: LargeModel = prepare(large_spec("vit-large", **SMALL), tmp_path / "w", seed=5)
    inputs = random_inputs(lm.example, 16, seed=5)
    s = setup(eight.runtime, lm, repeats=1)
    problem, plan = plan_on(s, 7, "even")
    done = serve(eight.runtime, lm, problem, plan, inputs, whole_model_outputs(lm, inputs))
    assert eight.alive_nodes() == 8 and plan.n_partitions == 7
    assert done.run.request_ids == list(range(16)) and done.run.duplicates == 0
    assert done.max_abs_diff <= 1e-4
    sizes = {k: v.numel() for k, v in lm.reference().named_parameters()}
    assert sum(t["parameters"] for t in done.run.stage_timings) == sum(sizes.values())
    two_gb = 2048 * 2**20
    assert [t.get("cgroup_limit_bytes") for t in done.run.stage_timings] == [two_gb] * 7
    assert all(t["cgroup_limit_hits"] == 0 and 0 < t["cgroup_peak_bytes"] < two_gb
               for t in done.run.stage_timings)
    assert all(0 < p < d == two_gb for p, d in zip(done.peak_bytes, done.device_bytes,
                                                     strict=True))
