"""`edgewise continual plan|run` through Typer's runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from edgewise.cli.continual import app

runner = CliRunner()


def test_plan_prints_the_thief_plan() -> None:
    result = runner.invoke(app, ["plan", "--streams", "2", "--window-s", "5"])
    assert result.exit_code == 0, result.output
    assert "thief plan" in result.output
    assert "cam0" in result.output and "cam1" in result.output


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
    assert "lobby" in result.output
    result = runner.invoke(app, ["plan", "--frames", str(tmp_path / "lobby"), "--window", "5"])
    assert result.exit_code == 2 and "2 windows" in result.output


def test_run_measures_accuracy_for_real() -> None:
    result = runner.invoke(app, ["run", "--streams", "1", "--windows", "1", "--window-s", "1.5",
                                 "--policy", "uniform"])
    assert result.exit_code == 0, result.output
    assert "measured window-averaged inference accuracy" in result.output
    assert "cam0:" in result.output
    bad = runner.invoke(app, ["run", "--policy", "nope", "--windows", "1"])
    assert bad.exit_code == 2 and "unknown" in bad.output
