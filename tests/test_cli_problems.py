"""The problem commands: `pipeline plan` (no Ray); `update`'s are in tests/update/test_cli.py."""

from __future__ import annotations

from typer.testing import CliRunner

from edgewise.cli import app

runner = CliRunner()


def test_pipeline_plan_compares_the_policies() -> None:
    result = runner.invoke(app, ["pipeline", "plan", "mobilenet-v2", "--nodes", "5",
                                 "--memory-mb", "64"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for policy in ("seifer", "random", "joint-greedy", "bottleneck-dp", "exact"):
        assert policy in result.output


def _bottlenecks_ms(output: str) -> dict[str, float]:
    rows = [line.split("│") for line in output.splitlines() if line.startswith("│")]
    return {r[1].strip(): float(r[5]) for r in rows if len(r) > 6 and r[5].strip()}


def test_pipeline_plan_paper_scoring_drops_the_dispatcher_transfer() -> None:
    args = ["pipeline", "plan", "mobilenet-v2", "--nodes", "5", "--memory-mb", "64"]
    deployed = runner.invoke(app, args, env={"COLUMNS": "200"})
    paper = runner.invoke(app, [*args, "--paper-scoring"], env={"COLUMNS": "200"})
    assert deployed.exit_code == 0 and paper.exit_code == 0, paper.output
    with_input, without = _bottlenecks_ms(deployed.output), _bottlenecks_ms(paper.output)
    assert with_input["exact"] > without["exact"] > 0
