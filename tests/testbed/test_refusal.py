"""A host that cannot run a testbed: `edgewise testbed up` exits 2 with one line naming
what is missing and makes nothing; `down` of an unknown name is not an error (no root)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgewise.cli import app

runner = CliRunner()
FOUR = Path(__file__).parents[2] / "examples" / "three-nanos.yaml"


def _namespaces() -> set[str]:
    folder = Path("/var/run/netns")
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def test_up_without_root_and_tc_names_both_in_one_line_and_makes_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda tool: None if tool == "tc" else real_which(tool))
    before = _namespaces()

    result = runner.invoke(app, ["testbed", "up", str(FOUR), "--name", "refused"])

    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "root" in lines[0] and "`tc`" in lines[0] and "Traceback" not in result.output
    assert _namespaces() == before and not list(tmp_path.rglob("*.json"))
    assert not Path("/tmp/ewtb/refused").exists()


def test_down_of_a_name_that_does_not_exist_exits_0_and_says_so(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # also where nothing can be made

    result = runner.invoke(app, ["testbed", "down", "no-such-testbed"])

    assert result.exit_code == 0
    assert "no testbed named 'no-such-testbed'" in result.output
