"""`edgewise continual plan|run` through Typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from edgewise.cli.continual import app

runner = CliRunner()


def test_plan_json_is_a_plan_within_the_device() -> None:
    result = runner.invoke(app, ["plan", "--streams", "2", "--window-s", "5", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["policy"] == "thief" and plan["violations"] == 0
    assert [s["stream"] for s in plan["streams"]] == ["cam0", "cam1"]
    assert sum(s["retrain_share"] + s["inference_share"] for s in plan["streams"]) <= 1 + 1e-9
    for s in plan["streams"]:
        assert 0.0 <= s["deployed_accuracy"] <= 1.0
        # a retraining is planned only with its profile, and only one that can finish
        assert (s["retrain"] is None) == (s["retrained_accuracy"] is None)
        if s["retrain"] is not None:
            assert s["retrain_cost_s"] / s["retrain_share"] <= 5.0 + 1e-9
    # the window-averaged estimate (Eq. 1) cannot beat the best model a stream can have in
    # the window, retrained or not, and is not nothing
    best = max(max(s["deployed_accuracy"], s["retrained_accuracy"] or 0.0)
               for s in plan["streams"])
    assert 0.0 < plan["estimated_accuracy"] <= best + 1e-9


def test_plan_errors_are_clear() -> None:
    result = runner.invoke(app, ["plan", "--policy", "nope"])
    assert result.exit_code == 2
    assert "unknown" in result.output and "nope" in result.output
    result = runner.invoke(app, ["plan", "--frames", "/no/such/dir"])
    assert result.exit_code == 2 and "not a directory" in result.output


def test_plan_on_user_frames(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for w in ("w0", "w1"):
        (tmp_path / "lobby" / w).mkdir(parents=True)
        for i in range(40):
            img = rng.integers(0, 255, (8, 8), dtype=np.uint8)
            Image.fromarray(img).save(tmp_path / "lobby" / w / f"{i:03d}.png")
    result = runner.invoke(app, ["plan", "--frames", str(tmp_path / "lobby"), "--window", "1"])
    assert result.exit_code == 0, result.output
    assert "lobby" in result.output and "thief plan" in result.output
    result = runner.invoke(app, ["plan", "--frames", str(tmp_path / "lobby"), "--window", "5"])
    assert result.exit_code == 2 and "2 windows" in result.output


@pytest.mark.ray
def test_run_measures_accuracy_for_real() -> None:
    result = runner.invoke(app, ["run", "--streams", "1", "--windows", "1", "--window-s", "1.5",
                                 "--policy", "uniform", "--json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert run["policy"] == "uniform" and len(run["windows"]) == 1
    window = run["windows"][0]
    assert set(window["accuracy"]) == {"cam0"} and 0.0 <= window["accuracy"]["cam0"] <= 1.0
    assert run["mean_accuracy"] == window["mean_accuracy"] == window["accuracy"]["cam0"]
    bad = runner.invoke(app, ["run", "--policy", "nope", "--windows", "1"])
    assert bad.exit_code == 2 and "unknown" in bad.output


def test_bench_ekya_sweep_is_a_flag() -> None:
    from edgewise.cli import app as root

    result = CliRunner().invoke(root, ["bench", "ekya", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--sweep" in result.output and "--no-sweep" not in result.output
