"""`edgewise demo`: each part's finding read against its paper, the closing summary, and the
quick mode run for real."""

from __future__ import annotations

import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.cli.demo_summary import (
    apps_finding,
    continual_finding,
    pipeline_finding,
    sites_finding,
    srole_finding,
    summary_table,
    training_finding,
)


def _pipeline(throughput_rps: float, bound_rps: float, vacuous: bool = False) -> dict:  # type: ignore[type-arg]
    return {"plan": {"throughput_rps": bound_rps}, "timings": {"throughput_rps": throughput_rps},
            "time_dilation": 1.0, "results": 30, "requests": 30, "check_vacuous": vacuous,
            "outputs_equal_to_the_model": True}


def test_each_finding_agrees_or_says_why_not() -> None:
    assert apps_finding([{"periods": 40, "misses": 0}], emulated=True).agrees is True
    missed = apps_finding([{"periods": 40, "misses": 10}, {"periods": 60, "misses": 15}], True)
    assert missed.agrees is False and "25 of 100" in missed.result and "host" in missed.verdict
    assert pipeline_finding(_pipeline(18.0, 19.1)).agrees is True
    slow = pipeline_finding(_pipeline(2.2, 19.1))
    assert slow.agrees is False and "2.2/s vs bound 19.1/s" in slow.result
    assert "vacuously" in pipeline_finding(_pipeline(18.0, 19.1, vacuous=True)).result
    lost = continual_finding(0.559, 0.568)
    assert lost.agrees is False and "0.559" in lost.result and "streams" in lost.verdict
    assert continual_finding(0.6, 0.55).agrees is True
    assert sites_finding({"digits-a": 0.911}, 1).agrees is True
    assert sites_finding({"digits-a": 0.911}, 0).agrees is False
    srole = srole_finding({"srole-c": 463.5, "marl": 3305.2})
    assert srole.agrees is True and "86%" in srole.result and "simulated" in srole.part
    assert training_finding(0.97, 1, "the epoch-1 checkpoint").agrees is None


def test_the_summary_has_a_row_per_part_with_its_verdict() -> None:
    findings = [training_finding(0.97, 1, "the start"), continual_finding(0.5, 0.6)]
    console = Console(width=80, record=True, color_system=None)

    console.print(summary_table(findings, 123.4))

    text = " ".join(console.export_text().split())
    assert "2 parts in 123 s" in text and "does not agree" in text and "no paper figure" in text


@pytest.mark.ray
@pytest.mark.timeout(600)  # 383 s on the 2-core host at load average ~100
def test_the_quick_demo_runs_every_part_and_the_summary(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))
    # wide enough that the summary's cells are not wrapped (80 columns is tested on tables)
    result = CliRunner().invoke(app, ["demo", "--quick"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert re.search(r"edgewise demo: 6 parts in \d+ s", text)
    # each part's row in the summary (a cell may wrap after its first two words)
    for part in ("1 update,", "2 Deep-Edge", "3 SEIFER", "4 Ekya", "5 Okita", "6 SROLE"):
        assert part in text
    assert text.count("shows:") == 6
