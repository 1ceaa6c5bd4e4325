"""The problem commands: `pipeline plan` (no Ray); `update`'s are in tests/update/test_cli.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from edgewise.cli import app

runner = CliRunner()


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
