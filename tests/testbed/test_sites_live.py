"""Okita's real run on a kernel-enforced testbed of three edge sites (the shipped
okita-sites cluster, its uplinks shaped by tc), from the command line as a user runs it:
every planned chunk trained, the job moved between sites, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgewise.cluster.examples import example_path
from edgewise.testbed import session
from edgewise.testbed.teardown import leftovers
from tests.testbed.conftest import require_testbed_host

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow]
NAME = "pytest-sites"
EDGEWISE = str(Path(sys.executable).parent / "edgewise")
CLUSTER = example_path("okita-sites.yaml")
SCENARIO = CLUSTER.parent / "scenarios" / "okita-demo.yaml"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[session.Testbed, Path]]:
    require_testbed_host()
    state = tmp_path_factory.mktemp("sites-state")
    with session.testbed(CLUSTER, NAME, state=state) as tb:
        yield tb, state
    assert leftovers(NAME, tb.nodes.cgroups) == dict.fromkeys(
        ("namespaces", "veths", "cgroups", "processes"), 0)


@pytest.mark.timeout(900)
def test_sites_run_trains_every_chunk_and_moves_the_job_on_the_testbed(
        sites: tuple[session.Testbed, Path]) -> None:
    tb, state = sites
    done = subprocess.run(
        [EDGEWISE, "testbed", "exec", NAME, "--", EDGEWISE, "sites", "run", str(SCENARIO),
         "--cluster", str(CLUSTER), "--address", "auto", "--json"],
        env=os.environ | {"EDGEWISE_STATE_DIR": str(state)}, capture_output=True, text=True,
        timeout=840)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    run = found["run"]
    assert run["untrained_chunks"] == dict.fromkeys(run["final_accuracy"], 0)
    assert run["migrations"] >= 1  # the scenario's schedule moves the job between sites
    assert run["records"] and {r["job"] for r in run["records"]} == set(run["final_accuracy"])
    assert all(a > 0.2 for a in run["final_accuracy"].values()), run["final_accuracy"]
    assert tb.alive_nodes() == len(tb.record.plan.nodes)
