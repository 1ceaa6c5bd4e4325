"""The pipeline-scale bench's pure parts: its place in the bench kit, its refusal on a host
that cannot run testbeds (one line, exit 2), a bad option refused, and its plot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgewise.bench import BenchSpec
from edgewise.cli import app
from edgewise.cli.bench import BENCHES, LISTING
from edgewise.suites.pipeline_scale import SPEC
from edgewise.suites.pipeline_scale_plots import plots

runner = CliRunner()


def test_the_bench_is_a_bench_of_the_kit() -> None:
    assert isinstance(SPEC, BenchSpec) and SPEC.name == "pipeline-scale"
    assert BENCHES["pipeline-scale"] == "edgewise.suites.pipeline_scale:SPEC"
    assert LISTING["pipeline-scale"]


def test_without_root_the_bench_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    result = runner.invoke(app, ["bench", "pipeline-scale", "--json"])

    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "root" in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_bad_model_scale_is_refused_naming_the_option() -> None:
    result = runner.invoke(app, ["bench", "pipeline-scale", "--model-scale", "huge"])

    assert result.exit_code == 2 and "--model-scale" in result.output


def test_the_plot_has_one_line_per_policy(tmp_path: Path) -> None:
    figures = {"vit_large_throughput_by_devices": {
        "pipeedge": {"1": 0.1, "2": 0.2, "4": 0.4, "8": 0.7, "16": 1.2},
        "even": {"1": 0.1, "2": 0.19, "4": 0.35, "8": 0.6, "16": 0.9}}}
    made = plots(figures, tmp_path)
    assert [Path(p).name for p in made["plots"]] == ["throughput-by-devices.png"]
    assert Path(made["plots"][0]).stat().st_size > 0


def test_pipeline_scale_names_an_unknown_model_in_one_line() -> None:
    result = runner.invoke(app, ["pipeline", "scale", "examples/pipeline-16-homogeneous.yaml",
                                 "--model", "vit-gigantic"])

    assert result.exit_code == 2
    assert "vit-gigantic" in result.output and "vit-large" in result.output
    assert "Traceback" not in result.output
