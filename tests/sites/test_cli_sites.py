"""`edgewise sites ...` through Typer's runner: --json output, the plot, and errors exiting 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from edgewise.cli.sites import app
from edgewise.sites.scenario import default_scenario, load_scenario
from edgewise.sites.sim import simulate

SMALL = Path(__file__).parents[2] / "src" / "edgewise" / "sites" / "examples" / "small.yaml"
runner = CliRunner()


def _json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)  # the plot note goes to stderr
    return out


def test_simulate_reports_each_policy_and_saves_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "schedule.png"
    out = _json(["simulate", str(SMALL), "-p", "okita", "-p", "fifo", "--plot", str(png)])
    problem = load_scenario(SMALL)
    by_policy = {r["policy"]: r for r in out["results"]}
    assert list(by_policy) == ["okita", "fifo"]
    for policy, row in by_policy.items():
        expected = simulate(problem, policy, seed=0)
        assert row["total_cost"] == pytest.approx(expected.total_cost)
        assert row["total_cost"] == pytest.approx(
            row["latency"] + row["data_transfer"] + row["parameter_exchange"])
        assert row["makespan"] == expected.makespan and row["unfinished"] == []
        assert row["timings"]["decision_seconds"] >= 0
    assert png.stat().st_size > 1000


def test_simulate_runs_the_generator_without_a_file() -> None:
    out = _json(["simulate", "--sites", "4", "--jobs", "5", "--horizon", "15"])
    assert (out["sites"], out["jobs"], out["horizon"]) == (4, 5, 15)
    (row,) = out["results"]
    expected = simulate(default_scenario(0, n_sites=4, n_jobs=5, horizon=15), "okita")
    assert row["completion"] == expected.completion and len(row["completion"]) == 5


def test_plan_lists_every_chunk_of_every_job_once() -> None:
    out = _json(["plan", str(SMALL), "-p", "okita"])
    problem = load_scenario(SMALL)
    assert out["policy"] == "okita"
    sites = [s.name for s in problem.sites]
    for job in problem.jobs:
        supplied = dict.fromkeys(sites, 0)
        for entry in (e for e in out["entries"] if e["job"] == job.name):
            assert entry["ps_site"] in sites and set(entry["workers"]) <= set(sites)
            for move in entry["transfers"]:
                supplied[move["src"]] += move["chunks"]
        assert [supplied[s] for s in sites] == list(job.data)   # (2a), by site name
        assert out["completion"][job.name] == max(
            e["slot"] for e in out["entries"] if e["job"] == job.name)


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
