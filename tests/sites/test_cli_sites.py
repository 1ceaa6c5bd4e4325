"""`edgewise sites ...` through Typer's runner: tables, the plot, and errors exiting 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgewise.cli.sites import app
from edgewise.sites.scenario import load_scenario
from edgewise.sites.sim import simulate

SMALL = Path(__file__).parents[2] / "src" / "edgewise" / "sites" / "examples" / "small.yaml"
runner = CliRunner()


def test_simulate_prints_each_policy_and_saves_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "schedule.png"
    result = runner.invoke(app, ["simulate", str(SMALL), "-p", "okita", "-p", "fifo",
                                 "--plot", str(png)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    okita = simulate(load_scenario(SMALL), "okita", 0)
    assert f"{okita.total_cost:,.1f}" in result.output
    assert "fifo" in result.output
    assert png.stat().st_size > 1000


def test_simulate_runs_the_generator_without_a_file() -> None:
    result = runner.invoke(app, ["simulate", "--sites", "4", "--jobs", "5", "--horizon", "15"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "4 sites, 5 jobs, T = 15 slots" in result.output


def test_plan_prints_every_job_of_the_schedule() -> None:
    result = runner.invoke(app, ["plan", str(SMALL), "-p", "okita"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for job in ("resnet-cifar", "vgg-caltech", "alexnet-tiny"):
        assert job in result.output
    assert "okita schedule" in result.output


@pytest.mark.parametrize("args, message", [
    (["simulate", "/no/such/scenario.yaml"], "cannot read the file"),
    (["plan", str(SMALL), "-p", "nope"], "unknown policy"),
    (["run", "/no/such/scenario.yaml"], "cannot read the file"),
])
def test_user_errors_exit_2_without_a_traceback(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_scenario_too_big_for_the_digits_set_is_refused_before_ray(tmp_path: Path) -> None:
    text = SMALL.read_text().replace("data: [12, 18, 15]", "data: [900, 900, 15]")
    big = tmp_path / "big.yaml"
    big.write_text(text)
    result = runner.invoke(app, ["run", str(big)])
    assert result.exit_code == 2, result.output
    assert "digits training set" in result.output


def test_run_on_a_cluster_file_without_the_scenarios_sites_exits_2() -> None:
    nanos = Path(__file__).parents[2] / "examples" / "three-nanos.yaml"
    result = runner.invoke(app, ["run", str(SMALL), "--cluster", str(nanos)])
    assert result.exit_code == 2, result.output
    assert "no site 'edge-a'" in result.output
