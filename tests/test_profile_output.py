"""`edgewise profile` writes to the state folder or --output and never into the repository:
the shipped profiles are read-only inputs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import edgewise.cli.profile as cli_profile
from edgewise.cli import app
from edgewise.perf.profiler import ProfileConfig
from edgewise.perf.stress import stress_grid

ROOT = Path(__file__).parents[1]
runner = CliRunner()


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


def _one_idle_sample(device_type: str = "host-x86", repeats: int = 1) -> ProfileConfig:
    """The quick grid cut to its idle point and one batch size: the real profiler and its
    write path, without stress-ng, in about a second."""
    return ProfileConfig(tuple(stress_grid((0,), (0,), (0,))), batch_sizes=(16,),
                         repeats=repeats, step_s=0.3, settle_s=0.0, device_type=device_type)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
def test_profile_quick_leaves_the_repository_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))
    monkeypatch.chdir(ROOT)  # where a tour runs it: the checkout
    monkeypatch.setattr(cli_profile, "quick_config", _one_idle_sample)
    before = _git_status()

    result = runner.invoke(app, ["profile", "--quick", "--json"])

    assert result.exit_code == 0, result.output
    assert _git_status() == before
    written = tmp_path / "profiles" / "host-x86-quick.csv"
    assert len(written.read_text().splitlines()) == 2  # the header and the one sample


def test_profile_refuses_to_write_a_shipped_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_profile, "run_profile", _must_not_run)
    shipped = ROOT / "profiles" / "host-x86.csv"
    if cli_profile.shipped_profiles() is None:
        pytest.skip("edgewise is not installed from this checkout")

    result = runner.invoke(app, ["profile", "--quick", "--output", str(shipped)])

    assert result.exit_code == 2
    assert "--output" in result.output and "shipped profiles" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def _must_not_run(*_: object, **__: object) -> None:
    raise AssertionError("a shipped profile was opened for writing")


def test_batch_size_options_choose_the_profiled_batch_sizes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--batch-size` (repeatable) replaces the grid's batch sizes: only those are measured."""
    monkeypatch.setattr(cli_profile, "quick_config", _one_idle_sample)
    out = tmp_path / "p.csv"

    result = runner.invoke(app, ["profile", "--quick", "--output", str(out), "--json",
                                 "--batch-size", "8", "--batch-size", "4", "--batch-size", "8"])

    assert result.exit_code == 0, result.output
    header, *rows = out.read_text().splitlines()
    column = header.split(",").index("batch_size")
    assert sorted(int(r.split(",")[column]) for r in rows) == [4, 8]


@pytest.mark.parametrize("size", ["0", "5000"])
def test_a_batch_size_out_of_range_is_refused(size: str, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setattr(cli_profile, "run_profile", _must_not_run)

    result = runner.invoke(app, ["profile", "--quick", "--output", str(tmp_path / "p.csv"),
                                 "--batch-size", size])

    assert result.exit_code == 2
    assert "--batch-size" in result.output and size in result.output
