"""SROLE on a user's own model: its levels by the same graph analysis as SROLE's three, and
`modelparallel place|train|simulate --model SPEC` on a ``py:`` model with npz data and on a
transformers config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.modelparallel.jobs import MB, make_job, model_profile
from edgewise.nn.workload import build_network, load_workload
from edgewise.nn.workload.synthetic import make_shapes_npz

runner = CliRunner()

MODEL = '''
from torch import nn


def make(classes: int = 4, width: int = 4) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
        nn.Flatten(), nn.Linear(8 * width, classes))
'''


@pytest.fixture(scope="module")
def workload_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workload file: the user's model file on an npz of 16×16 shapes (no input shape:
    the data fixes it)."""
    root = tmp_path_factory.mktemp("srole")
    (root / "mine.py").write_text(MODEL)
    make_shapes_npz(root / "shapes.npz", per_class=5, size=16, seed=0)
    path = root / "workload.yaml"
    path.write_text(yaml.safe_dump({"name": "mine", "model": "py:mine.py:make",
                                    "data": "npz:shapes.npz"}))
    return path


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path / "state"))


def test_levels_are_the_weighted_layers(workload_file: Path) -> None:
    workload = load_workload(workload_file)
    profile = model_profile(workload)
    net = build_network(workload, num_classes=4)
    weighted = [m for m in net.modules() if not list(m.children())
                and any(True for _ in m.parameters())]
    assert len(profile.gflop) == len(weighted) == 3  # conv, conv, dense
    for level, layer in zip(profile.param_mb, weighted, strict=True):
        assert level == pytest.approx(sum(4 * p.numel() for p in layer.parameters()) / MB)
    assert profile.input_mb == pytest.approx(3 * 16 * 16 * 4 / MB)  # the npz's samples
    job = make_job("j", workload, origin=0, batch=8)
    assert job.model == "mine" and len(job.partitions) == 3
    assert [p.name for p in job.partitions] == ["mine/0", "mine/1", "mine/2"]


def test_place_and_simulate_a_workload_file(workload_file: Path) -> None:
    result = runner.invoke(app, ["modelparallel", "place", "--workload-file", str(workload_file),
                                 "--rounds", "4", "--json"])
    assert result.exit_code == 0, result.output
    jobs = json.loads(result.stdout)["jobs"]
    assert len(jobs) == 6 and all(len(j["proposed"]) == 3 for j in jobs)  # 3 per cluster
    assert all(j["job"].startswith("mine@") for j in jobs)
    result = runner.invoke(app, ["modelparallel", "simulate", "--workload-file",
                                 str(workload_file), "-m", "srole-c", "-m", "rl", "--rounds",
                                 "4", "--online", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == {"srole-c", "rl"}


def test_train_then_place_a_transformers_model(tmp_path: Path) -> None:
    spec = ["--model", "hf:MobileNetV2Config", "--model-arg", "depth_multiplier=0.35",
            "--input-shape", "3,32,32", "--classes", "4", "--partitions", "4"]
    agents = tmp_path / "agents.json"
    result = runner.invoke(app, ["modelparallel", "train", "-m", "rl", *spec, "--rounds", "3",
                                 "--out", str(agents), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rounds"] == 3 and agents.is_file()
    result = runner.invoke(app, ["modelparallel", "place", "-m", "rl", *spec, "--agents",
                                 str(agents), "--json"])
    assert result.exit_code == 0, result.output
    jobs = json.loads(result.stdout)["jobs"]
    assert jobs and all(len(j["proposed"]) == 4 for j in jobs)
