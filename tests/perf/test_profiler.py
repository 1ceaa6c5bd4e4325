"""The profiler: a tiny real profile writes exactly the schema's columns, each sample's
steps and step-time interval among them, and resumes."""

from __future__ import annotations

import csv
import importlib
import json
import math
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.errors import EdgewiseError
from edgewise.perf.profiler import ProfileConfig, profile, sample_key
from edgewise.perf.schema import COLUMNS, PROFILE_COLUMNS
from edgewise.perf.stress import StressPoint

# ``edgewise.cli.profile`` the attribute is the command; the module is in sys.modules
cli_profile = importlib.import_module("edgewise.cli.profile")
POINT = StressPoint(cpu_percent=50) if shutil.which("stress-ng") else StressPoint()


def _tiny(batch_sizes: tuple[int, ...] = (8, 32)) -> ProfileConfig:
    return ProfileConfig((POINT,), batch_sizes=batch_sizes, step_s=0.3, settle_s=0.2,
                         app_period_ms=100.0, device_type="test-host")


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def test_tiny_profile_writes_the_schema_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "p" / "profile.csv"
    calls: list[tuple[int, int, str]] = []
    started = time.monotonic()
    first = profile(out, _tiny(), lambda d, n, k: calls.append((d, n, k)))
    profiled_ms = 1000 * (time.monotonic() - started)
    header, rows = _rows(out)
    assert tuple(header) == PROFILE_COLUMNS and len(rows) == 2 and first.written == 2
    assert calls[0] == (0, 2, sample_key(POINT, 8, 0)) and calls[-1] == (2, 2, "done")
    for row, batch in zip(rows, (8, 32), strict=True):
        assert (row["device_type"], row["app_kind"], int(row["batch_size"])) == \
            ("test-host", "sift", batch)
        assert int(row["n_workers"]) == 1 and float(row["batch_mean"]) == batch
        # seconds, not milliseconds: at most 0.0016 s a sample and 0.018 s an update at load
        # average 10 to 20 on 2 cores, over 50x under these bounds
        assert 0 < float(row["compute_s_per_sample"]) < 0.1 and 0 < float(row["update_s"]) < 1
        assert 0 <= float(row["new_cpu"]) <= 100 and 0 < float(row["mem"]) <= 100
        assert float(row["ps_cpu"]) == float(row["cpu"])
        # milliseconds: above 1 (SIFT takes longer), and no frame outlasts the profiling
        # that ran the app (the host's load stretches it: 196 to 1,782 ms at load 10 to 20)
        exec_ms = float(row["app_exec_ms"])
        assert not math.isnan(exec_ms) and 1.0 < exec_ms < profiled_ms
        # the stop rule's report: at least 3 steps, and the interval they reached (within
        # the 5 % target, or above it where the sample stopped at the cap)
        assert int(row["steps"]) >= 3 and 0 <= float(row["step_time_ci95_rel"]) < math.inf

    again = profile(out, _tiny())
    assert (again.written, again.skipped, len(again.samples)) == (0, 2, 2)
    assert _rows(out)[1] == rows

    more = profile(out, _tiny((8, 16, 32)))
    assert (more.written, more.skipped) == (1, 2)
    assert [int(r["batch_size"]) for r in _rows(out)[1]] == [8, 32, 16]
    assert (out.parent / "profile.csv.keys").read_text().split()[-1] == sample_key(POINT, 16, 0)


def test_unusable_existing_files_are_user_errors(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("a,b\n1,2\n")
    with pytest.raises(EdgewiseError, match="columns"):
        profile(wrong, _tiny())
    no_keys = tmp_path / "nokeys.csv"
    no_keys.write_text(",".join(COLUMNS) + "\n" + ",".join(["1"] * len(COLUMNS)) + "\n")
    with pytest.raises(EdgewiseError, match="cannot resume"):
        profile(no_keys, _tiny())
    with pytest.raises(EdgewiseError, match="positive"):
        profile(tmp_path / "x.csv", _tiny(()))


def test_cli_profiles_and_prints_a_summary(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_profile, "quick_config",
                        lambda device, repeats: replace(_tiny((16,)), device_type=device))
    out = tmp_path / "q.csv"
    result = CliRunner().invoke(app, ["profile", "--quick", "--output", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["written"], summary["skipped"]) == (1, 1, 0)
    (point,) = summary["points"]
    assert point["stress point"] == POINT.key and point["rows"] == 1
    assert point["sift exec ms"] is not None and point["sift exec ms"] > 1.0
    assert point["step ±%"] is not None and point["step ±%"] >= 0
    interval = summary["step_time_ci95_rel"]
    assert (interval["target"], interval["reported"], interval["unreported"]) == (0.05, 1, 0)
    assert interval["max"] == interval["median"] == pytest.approx(point["step ±%"] / 100)
    assert len(_rows(out)[1]) == 1
    again = CliRunner().invoke(app, ["profile", "--quick", "--output", str(out), "--json"])
    assert json.loads(again.stdout)["skipped"] == 1  # resumed: nothing measured twice
    bad = CliRunner().invoke(app, ["profile", "--quick", "--output", str(out),
                                   "--device-type", "other"])
    assert bad.exit_code == 2 and "another device type" in bad.output
