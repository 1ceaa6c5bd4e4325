"""`edgewise demo`: each part's finding read against its paper, the closing summary, and the
parts run in order with their settings (each part runs for real in its own test)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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


class _Parts:
    """The demo's six parts, recorded instead of run (each runs for real in its own test:
    tests/test_cli.py trains with a killed worker, tests/pipeline/test_cli_run.py kills a
    stage, tests/continual/test_cli_continual.py runs the windows, tests/sites/test_run.py
    moves the demo's job, tests/modelparallel/test_srole_cli.py simulates the methods; the
    Deep-Edge plan with its apps runs in tests/update/test_cluster_plan.py and on the
    testbed in tests/testbed/test_live.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import edgewise.cli.continual as continual
        import edgewise.cli.demo as demo
        import edgewise.cli.modelparallel as modelparallel
        import edgewise.cli.pipeline_run as pipeline_run
        import edgewise.cli.sites as sites
        import edgewise.cli.update as update

        self.calls: dict[str, Any] = {}
        monkeypatch.setattr(demo, "run_equal_update", self.train)
        monkeypatch.setattr(update, "run_plan", self.plan)
        monkeypatch.setattr(pipeline_run, "run_pipeline", self.pipeline)
        monkeypatch.setattr(continual, "demo_part", self.continual)
        monkeypatch.setattr(sites, "demo_part", self.sites)
        monkeypatch.setattr(modelparallel, "demo_part", self.srole)

    def train(self, cluster: Path, config: Any, batch: int, kill: str | None,
              ledger: Path | None, address: str | None) -> Any:
        self.calls["train"] = (cluster.name, config.epochs, batch, kill, address)
        lost = SimpleNamespace(member="worker-nano-1", device="nano-1", reason="killed",
                               strikes=1, epoch=1)
        return SimpleNamespace(val_accuracy=0.912, interruptions=[lost])

    def plan(self, cluster: Path, policy: str, state: list[str], epochs: int,
             target: float, address: str | None) -> Any:
        self.calls["plan"] = (cluster.name, policy, epochs, address)
        return SimpleNamespace(apps=[{"periods": 40, "misses": 3}, {"periods": 60, "misses": 0}])

    def pipeline(self, **kwargs: Any) -> dict[str, Any]:
        self.calls["pipeline"] = kwargs
        return _pipeline(17.5, 19.1)

    def continual(self, windows: int, window_s: float) -> dict[str, float]:
        self.calls["continual"] = (windows, window_s)
        return {"thief": 0.71, "uniform": 0.64}

    def sites(self) -> Any:
        self.calls["sites"] = ()
        return SimpleNamespace(final_accuracy={"digits-a": 0.88}, migrations=1)

    def srole(self, online: int, rounds: int) -> dict[str, float]:
        self.calls["srole"] = (online, rounds)
        return {"srole-c": 463.5, "marl": 3305.2}


def test_the_quick_demo_runs_every_part_at_its_smallest_and_sums_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    parts = _Parts(monkeypatch)

    result = CliRunner().invoke(app, ["demo", "--quick"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert parts.calls == {
        "train": ("deep-edge-testbed.yaml", 2, 32, "nano-1@1", "local"),
        "plan": ("deep-edge-testbed.yaml", "deep-edge", 1, None),  # --quick: no testbed
        "pipeline": {"requests": 12, "kill_stage": 1, "seed": 0, "address": "local"},
        "continual": (1, 2.0), "sites": (), "srole": (4, 40)}
    text = " ".join(result.output.split())
    assert "single-host emulation: --no-testbed" in text
    assert "fault: worker-nano-1 on nano-1 (killed); strikes now 1; the job resumed from " \
           "the epoch-0 checkpoint" in text
    assert re.search(r"edgewise demo: 6 parts in \d+ s", text)
    for part in ("1 update,", "2 Deep-Edge", "3 SEIFER", "4 Ekya", "5 Okita", "6 SROLE"):
        assert part in text
    assert text.count("shows:") == 6
    assert "3 of 100 SIFT periods missed (3%)" in text and "0.710" in text


def test_the_full_demo_caps_its_testbed_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --quick the options reach the parts, and Deep-Edge's plan on a testbed runs
    at most TESTBED_EPOCHS (a testbed's devices run time-dilated)."""
    import edgewise.cli.demo as demo

    parts = _Parts(monkeypatch)

    @contextmanager
    def on_a_testbed(use_testbed: bool = True) -> Iterator[str | None]:
        assert use_testbed
        yield "10.0.0.1:6379"

    monkeypatch.setattr(demo, "demo_cluster", on_a_testbed)
    result = CliRunner().invoke(app, ["demo", "--epochs", "7", "--kill-worker", ""])

    assert result.exit_code == 0, result.output
    assert parts.calls["train"][1:4] == (7, 32, None)
    assert parts.calls["plan"][2:] == (demo.TESTBED_EPOCHS, "10.0.0.1:6379")
    assert parts.calls["pipeline"]["requests"] == demo.FULL.requests
    assert parts.calls["srole"] == (demo.FULL.srole_online, demo.FULL.srole_rounds)
