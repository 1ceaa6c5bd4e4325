"""Scenario files: the example loads, documents round-trip, errors name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import edgewise.sites
from edgewise.errors import ConfigError
from edgewise.sites.scenario import (
    default_scenario,
    load_scenario,
    problem_to_dict,
    scenario_from_dict,
)

EXAMPLE = Path(edgewise.sites.__file__).parent / "examples" / "small.yaml"


def _doc() -> dict[str, Any]:
    return problem_to_dict(load_scenario(EXAMPLE))


def test_example_loads_with_the_papers_fields() -> None:
    problem = load_scenario(EXAMPLE)
    assert [s.name for s in problem.sites] == ["edge-a", "edge-b", "edge-c"]
    job = problem.jobs[0]
    assert job.data == (12, 18, 15) and job.chunks_per_worker == 10
    assert job.latency(1) == pytest.approx(60 * 2.718281828 ** 0.25)
    assert problem.jobs[1].latency(3) == pytest.approx(40 * 3 + 100)
    assert (problem.jobs[2].latency(3), problem.jobs[2].latency(4)) == (50, 350)


def test_round_trip_and_determinism() -> None:
    problem = default_scenario(3, n_sites=6, n_jobs=5, horizon=20)
    assert scenario_from_dict(problem_to_dict(problem)) == problem
    assert default_scenario(3, n_sites=6, n_jobs=5, horizon=20) == problem
    assert default_scenario(4, n_sites=6, n_jobs=5, horizon=20) != problem


def test_default_scenario_follows_section_v_b() -> None:
    problem = default_scenario(0)
    assert (problem.n_sites, len(problem.jobs), problem.horizon) == (50, 100, 150)
    for job in problem.jobs:
        assert all(10 <= d <= 20 for d in job.data)
        assert 20 <= job.chunk_mb <= 60 and 30 <= job.param_mb <= 575
        assert 5 <= job.chunks_per_worker <= 15
        assert 0 <= job.worker_demand[0] <= 4 and 1 <= job.worker_demand[1] <= 10
        assert job.ps_demand[0] == 0 and 20 <= job.latency.tau <= 100
    off = [v for r, row in enumerate(problem.q) for c, v in enumerate(row) if r != c]
    assert min(off) >= 0.02 and max(off) <= 0.08


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["sites"][1].update(cpu=-4), "sites[1].cpu"),
    (lambda d: d["jobs"][0].pop("epochs"), "jobs[0].epochs"),
    (lambda d: d["jobs"][2]["latency"].update(kind="cubic"), "jobs[2].latency.kind"),
    (lambda d: d["jobs"][1].update(data=[1, 2]), "jobs[1].data"),
    (lambda d: d["jobs"][0].update(arrival=99), "jobs[0].arrival"),
    (lambda d: d.update(bandwidth_cost=[[0.0, 1.0], [1.0, 0.0]]), "bandwidth_cost"),
    (lambda d: d["sites"][0].update(gpus=3), "sites[0].gpus"),
])
def test_errors_name_the_field(edit: Any, field: str) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(ConfigError) as info:
        scenario_from_dict(doc, source="s.yaml")
    assert info.value.field == field
    assert str(info.value).startswith(f"s.yaml: {field}: ")


def test_unreadable_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("horizon: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(ConfigError, match="mapping"):
        load_scenario(listed)
