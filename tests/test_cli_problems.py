"""The problem commands: `update plan`, `update fit`, `pipeline plan` (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from edgewise.cli import app

ROOT = Path(__file__).resolve().parents[1]
TESTBED = str(ROOT / "examples" / "deep-edge-testbed.yaml")
runner = CliRunner()


def test_update_plan_drops_the_loaded_nano() -> None:
    result = runner.invoke(app, ["update", "plan", TESTBED, "--state", "nano-2=65,75,30"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "nano-2" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[3] == "0" and cells[4] == "-"  # no shard, no batch


def test_update_plan_rejects_bad_states_without_a_traceback() -> None:
    for bad in (["--state", "nano-2=1,2"], ["--state", "nano-2=1,2,300"],
                ["--state", "pi-ps=1,2,3"], ["--policy", "nope"]):
        result = runner.invoke(app, ["update", "plan", TESTBED, *bad])
        assert result.exit_code == 2, (bad, result.output)
        assert "Traceback" not in result.output


def test_update_plan_reports_infeasible_input() -> None:
    states = [f"--state={d}=95,95,80" for d in ("tx2-0", "nano-0", "nano-1", "nano-2")]
    result = runner.invoke(app, ["update", "plan", TESTBED, *states])
    assert result.exit_code == 2 and "deadline" in result.output


def test_update_fit_refuses_a_profile_of_another_device(tmp_path: Path) -> None:
    result = runner.invoke(app, ["update", "fit", str(ROOT / "profiles" / "host-x86.csv"),
                                 "--device-type", "jetson-nano", "--output", str(tmp_path)])
    assert result.exit_code == 2 and "device_type" in result.output


def _pipeline_plans(*extra: str) -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["pipeline", "plan", "mobilenet-v2", "--nodes", "5",
                                 "--memory-mb", "64", "--json", *extra])
    assert result.exit_code == 0, result.output
    return {p["policy"]: p for p in json.loads(result.output)["plans"]}


def test_pipeline_plan_compares_the_policies() -> None:
    plans = _pipeline_plans()
    assert set(plans) == {"seifer", "random", "joint-greedy", "bottleneck-search", "exact"}
    best = plans["exact"]["bottleneck_s"]
    for name, plan in plans.items():
        assert plan["bottleneck_s"] >= best * (1 - 1e-12), name  # exact is the least
        assert len(set(plan["nodes"])) == plan["partitions"] == len(plan["cuts"]) - 1
        assert plan["throughput_rps"] == pytest.approx(1 / plan["bottleneck_s"])
    assert plans["bottleneck-search"]["bottleneck_s"] == pytest.approx(best, rel=1e-12)


def test_pipeline_plan_paper_scoring_drops_the_dispatcher_transfer() -> None:
    with_input, without = _pipeline_plans(), _pipeline_plans("--paper-scoring")
    assert with_input["exact"]["bottleneck_s"] > without["exact"]["bottleneck_s"] > 0
    assert without["exact"]["transfer_s"][0] == 0.0 < with_input["exact"]["transfer_s"][0]
