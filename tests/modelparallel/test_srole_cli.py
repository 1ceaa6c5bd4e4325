"""`edgewise modelparallel` commands through Typer's runner: train, place, simulate (their
--json output), user errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from edgewise.cli.modelparallel import app
from edgewise.modelparallel.network import random_network

runner = CliRunner()


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path / "state"))


def test_train_then_place_with_the_saved_agents(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    res = runner.invoke(app, ["train", "-m", "srole-c", "--rounds", "5", "--out", str(path)])
    assert res.exit_code == 0, res.output
    assert path.exists() and "states learned" in res.output
    res = runner.invoke(app, ["place", "-m", "srole-c", "--model", "rnn", "--edges", "5",
                              "--agents", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    network = random_network(5, np.random.default_rng([0, 1]))  # the command's network
    assert doc["method"] == "srole-c" and len(doc["jobs"]) == 3  # 3 jobs per cluster, §V-A
    for job in doc["jobs"]:
        assert len(job["proposed"]) == len(job["executed"]) == 4  # the RNN's 4 levels
        assert set(job["proposed"]) <= set(network.candidates(job["origin"]))
        assert job["jct_s"] > 0
    assert doc["collisions_after"] <= doc["collisions_proposed"]
    res = runner.invoke(app, ["place", "-m", "srole-c", "--model", "rnn", "--edges", "5",
                              "--agents", str(path), "--partitions", "2"])
    assert res.exit_code == 0, res.output


def test_simulate_compares_methods() -> None:
    res = runner.invoke(app, ["simulate", "-m", "marl", "-m", "srole-d", "--model", "rnn",
                              "--edges", "5", "--online", "2", "--rounds", "3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) == {"marl", "srole-d"}
    assert doc["marl"]["shield_ops"] == 0 < doc["srole-d"]["shield_ops"]
    assert doc["marl"]["collisions"] == doc["marl"]["collisions_after"]  # unshielded
    assert all(row["jct_s"] > 0 for row in doc.values())


@pytest.mark.parametrize(("args", "field"), [
    (["place", "-m", "magic", "--rounds", "1"], "method"),
    (["place", "--partitions", "0", "--rounds", "1"], "--partitions"),
    (["simulate", "--edges", "7", "--online", "1", "--rounds", "1", "-m", "marl"], "n_edges"),
    (["simulate", "--model", "alexnet", "--online", "1", "--rounds", "1", "-m", "marl"],
     "model"),
])
def test_user_errors_exit_2_naming_the_field(args: list[str], field: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert field in res.output and "Traceback" not in res.output


def test_agents_of_another_method_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    assert runner.invoke(app, ["train", "-m", "marl", "--rounds", "2", "--out",
                               str(path)]).exit_code == 0
    res = runner.invoke(app, ["place", "-m", "srole-c", "--agents", str(path)])
    assert res.exit_code == 2 and "--agents" in res.output


@pytest.mark.parametrize("args", [["place", "--model", "alexnet"], ["place", "-m", "magic"],
                                  ["simulate", "--model", "alexnet"], ["simulate", "-m", "magic"]])
def test_unknown_names_are_reported_before_any_pre_training(args: list[str]) -> None:
    res = runner.invoke(app, args)  # default 600 pre-training rounds, never started
    assert res.exit_code == 2
    assert "unknown" in res.output and "pre-training" not in res.output
