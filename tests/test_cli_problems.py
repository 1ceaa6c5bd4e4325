"""The problem commands: `update plan`, `update fit`, `pipeline plan` (no Ray)."""

from __future__ import annotations

from pathlib import Path

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
