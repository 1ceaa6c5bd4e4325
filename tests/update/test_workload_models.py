"""Performance models per device type *and workload*: the profiler times a user's training
step, ``update fit --models NAME`` stores a set under that name, and ``update plan|run
--models NAME`` plans with it (the calibrated digits models otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.cluster.examples import example_path
from edgewise.nn.workload import load_workload, resolved, validate
from edgewise.nn.workload.synthetic import make_shapes_npz
from edgewise.perf.calibrated import sample_profile
from edgewise.perf.profiler import ProfileConfig
from edgewise.perf.profiler import profile as run_profile
from edgewise.perf.step_trainer import StepTrainer
from edgewise.perf.stress import stress_grid

TESTBED = str(example_path("deep-edge-testbed.yaml"))


@pytest.fixture
def workload_file(tmp_path: Path) -> Path:
    make_shapes_npz(tmp_path / "shapes.npz", per_class=10)
    (tmp_path / "model.py").write_text(
        "from torch import nn\n\ndef make(classes=4):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 64), nn.ReLU(),\n"
        "                         nn.Linear(64, classes))\n")
    spec = tmp_path / "w.yaml"
    spec.write_text("name: shapes-mlp\nmodel: py:model.py:make\ndata: npz:shapes.npz\n"
                    "data_args: {val_fraction: 0.25}\n")
    return spec


def test_the_profiler_times_the_workloads_own_step(workload_file: Path, tmp_path: Path) -> None:
    loaded = load_workload(workload_file)
    workload = resolved(loaded, validate(loaded))
    trainer = StepTrainer(0, workload=workload)
    assert tuple(trainer.x.shape) == (30, 3, 32, 32)  # its 30 training samples, decoded
    assert trainer.model(trainer.x[:2]).shape == (2, 4)  # its model, not DigitsCNN (10)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    compute_s, update_s = trainer.step(8)
    assert compute_s > 0 and update_s > 0
    assert any(not np.array_equal(a, b.detach()) for a, b in
               zip(before, trainer.model.parameters(), strict=True))  # the step trained it
    config = ProfileConfig(tuple(stress_grid((0,), (0,), (0,))), batch_sizes=(4, 8),
                           step_s=0.1, settle_s=0.0, app_kind="", device_type="host-x86",
                           workload=workload)
    result = run_profile(tmp_path / "w-profile.csv", config)
    assert len(result.samples) == 2 and result.written == 2
    assert all(float(s.row["compute_s_per_sample"]) > 0 for s in result.samples)


def test_models_fitted_under_a_name_plan_the_update(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path / "state"))
    runner = CliRunner()
    for i, device_type in enumerate(("jetson-tx2", "jetson-nano")):
        csv = tmp_path / f"{device_type}.csv"
        sample_profile(device_type, 400, np.random.default_rng(i)).to_csv(csv, index=False)
        fitted = runner.invoke(app, ["update", "fit", str(csv), "--device-type", device_type,
                                     "--models", "shapes-mlp", "--trials", "2"])
        assert fitted.exit_code == 0, fitted.output
        assert (tmp_path / "state" / "models" / "shapes-mlp" / device_type).is_dir()
    planned = runner.invoke(app, ["update", "plan", TESTBED, "--models", "shapes-mlp",
                                  "--json"])
    assert planned.exit_code == 0, planned.output
    found = json.loads(planned.stdout)
    assert found["models"] == "shapes-mlp" and sum(w["shard"] for w in found["workers"]) == 3855
    calibrated = json.loads(runner.invoke(app, ["update", "plan", TESTBED, "--json"]).stdout)
    assert calibrated["models"] == "calibrated"
    assert found["predicted_epoch_s"] != calibrated["predicted_epoch_s"]  # other models


@pytest.mark.parametrize("name", ["nothing-fitted", "../etc"])
def test_models_that_do_not_exist_are_one_line_naming_the_option(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["update", "plan", TESTBED, "--models", name])
    assert result.exit_code == 2 and "--models" in result.output, result.output
    assert "Traceback" not in result.output


def test_profile_refuses_a_bad_workload_before_measuring(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: py:nowhere.py:make\ndata: digits\n")
    result = CliRunner().invoke(app, ["profile", "--workload", str(bad), "--quick",
                                      "--output", str(tmp_path / "p.csv")])
    assert result.exit_code == 2 and "nowhere.py" in result.output, result.output
    assert not (tmp_path / "p.csv").exists()
