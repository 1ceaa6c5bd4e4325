"""`edgewise update plan` and `update fit` (no Ray): the plan as JSON, user errors as one
line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.cluster.examples import example_path
from edgewise.perf import calibrated_constants as K

ROOT = Path(__file__).resolve().parents[2]
TESTBED = str(example_path("deep-edge-testbed.yaml"))
runner = CliRunner()


def _plan(*args: str) -> dict:
    result = runner.invoke(app, ["update", "plan", TESTBED, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_update_plan_leaves_the_loaded_nano_out_and_keeps_every_deadline() -> None:
    idle, loaded = _plan(), _plan("--state", "nano-2=65,75,30")
    for plan in (idle, loaded):
        shards = {w["device"]: w["shard"] for w in plan["workers"]}
        assert sum(shards.values()) == plan["samples"] == 3855
        for w in plan["workers"]:
            assert (w["shard"] > 0) == (w["batch"] is not None)
            assert all(a["predicted_ms"] <= a["deadline_ms"] == K.SIFT_PERIOD_MS
                       for a in w["apps"]) or w["shard"] == 0
    nano2 = {w["device"]: w for w in loaded["workers"]}["nano-2"]
    assert nano2["state"] == [65.0, 75.0, 30.0]
    assert nano2["shard"] == 0 and nano2["batch"] is None
    # the others absorb its share, so the predicted epoch gets longer, never shorter
    assert loaded["predicted_epoch_s"] > idle["predicted_epoch_s"]


def test_update_plan_with_fair_keeps_the_users_batch_everywhere() -> None:
    plan = _plan("--policy", "fair", "--state", "nano-2=65,75,30")
    used = [w for w in plan["workers"] if w["shard"] > 0]
    assert {w["batch"] for w in used} == {32}
    assert max(w["shard"] for w in used) - min(w["shard"] for w in used) <= 1
    nano2 = {w["device"]: w for w in plan["workers"]}["nano-2"]
    assert nano2["shard"] > 0 and nano2["apps"][0]["predicted_ms"] > K.SIFT_PERIOD_MS


def test_update_plan_rejects_bad_states_without_a_traceback() -> None:
    for bad in (["--state", "nano-2=1,2"], ["--state", "nano-2=1,2,300"],
                ["--state", "pi-ps=1,2,3"], ["--policy", "nope"]):
        result = runner.invoke(app, ["update", "plan", TESTBED, *bad])
        assert result.exit_code == 2, (bad, result.output)
        assert "Traceback" not in result.output


def test_update_plan_reports_infeasible_input() -> None:
    states = [f"--state={d}=95,95,80" for d in ("tx2-0", "nano-0", "nano-1", "nano-2")]
    result = runner.invoke(app, ["update", "plan", TESTBED, *states])
    assert result.exit_code == 2 and "deadline" in result.output


def test_update_fit_refuses_a_profile_of_another_device(tmp_path: Path) -> None:
    result = runner.invoke(app, ["update", "fit", str(ROOT / "profiles" / "host-x86.csv"),
                                 "--device-type", "jetson-nano", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "device_type" in result.output


def test_plan_with_a_workload_plans_its_training_samples(tmp_path: Path) -> None:
    """A py: model on a generated npz: the plan shards the workload's training split, and a
    workload whose model does not exist is one line naming the field, before any plan."""
    from edgewise.nn.workload.synthetic import make_shapes_npz

    make_shapes_npz(tmp_path / "shapes.npz", per_class=10)
    (tmp_path / "model.py").write_text(
        "from torch import nn\n\ndef make(classes=4):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, classes))\n")
    spec = tmp_path / "w.yaml"
    spec.write_text("model: py:model.py:make\ndata: npz:shapes.npz\n"
                    "data_args: {val_fraction: 0.25}\n")
    cluster = str(example_path("deep-edge-testbed.yaml"))
    result = CliRunner().invoke(app, ["update", "plan", cluster, "--workload", str(spec),
                                      "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["samples"] == 30  # 40 samples, a quarter held out for validation
    assert sum(w["shard"] for w in found["workers"]) == 30  # every sample is in one shard

    spec.write_text("model: py:model.py:nothing\ndata: npz:shapes.npz\n")
    bad = CliRunner().invoke(app, ["update", "plan", cluster, "--workload", str(spec)])
    assert bad.exit_code == 2 and "model" in bad.output and "Traceback" not in bad.output
