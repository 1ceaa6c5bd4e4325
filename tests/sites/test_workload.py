"""Okita's jobs name their own workloads: a scenario job with ``workload:`` trains the user's
``py:`` model on the user's npz data, slot by slot, next to a job on the digits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from edgewise.cluster.examples import example_path
from edgewise.errors import ConfigError
from edgewise.nn.workload import workload_from_dict
from edgewise.nn.workload.synthetic import make_shapes_npz
from edgewise.sites.jobdata import checked_workloads, job_data
from edgewise.sites.problem import JobSlot, Plan, Transfer
from edgewise.sites.run import SiteRunConfig, execute_emulated
from edgewise.sites.scenario import load_scenario, problem_to_dict, scenario_from_dict

CAP = {"gpu": 2.0, "cpu": 16.0, "mem_gb": 64.0, "disk_gb": 100.0}
DEMAND = {"worker": {"gpu": 1, "cpu": 4, "mem_gb": 16, "disk_gb": 8},
          "ps": {"gpu": 0, "cpu": 4, "mem_gb": 8, "disk_gb": 5}}


def _job(name: str, **extra: object) -> dict[str, object]:
    return {"name": name, "arrival": 0, "data": [4, 0], "epochs": 2, "rho": 8.0,
            "chunk_mb": 20.0, "param_mb": 5.0, **DEMAND, **extra}


def _scenario(folder: Path, workload: str) -> Path:
    """Two sites; job ``shapes`` trains the user's model and data, ``digits`` the default."""
    doc = {"horizon": 2, "bandwidth_cost": [[0.0, 0.03], [0.03, 0.0]],
           "sites": [{"name": f"edge-{c}", **CAP} for c in "ab"],
           "jobs": [_job("shapes", workload=workload), _job("digits")]}
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _plan() -> Plan:
    """Slot 0: ``shapes`` on edge-a's four chunks; slot 1: ``digits`` at edge-b on four
    chunks shipped from edge-a."""
    return Plan("hand", (
        JobSlot("shapes", 0, (1, 0), 0, (Transfer(0, 0, 4),)),
        JobSlot("digits", 1, (0, 1), 1, (Transfer(0, 1, 4),)),
    ), {"shapes": 0, "digits": 1})


@pytest.fixture(scope="module")
def user_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped npz example (a ``py:`` model on generated shapes) in a folder of its own."""
    folder = tmp_path_factory.mktemp("okita-workload")
    (folder / "w").mkdir()
    for name in ("shapes-npz.yaml", "my_model.py"):
        shutil.copy(example_path(f"workloads/{name}"), folder / "w" / name)
    make_shapes_npz(folder / "w" / "data" / "shapes.npz", per_class=40, seed=1)
    return folder


def test_a_relative_workload_is_found_beside_the_scenario(user_files: Path) -> None:
    problem = load_scenario(_scenario(user_files, "w/shapes-npz.yaml"))
    shapes, digits = problem.jobs
    assert shapes.workload == str(user_files / "w" / "shapes-npz.yaml") and digits.workload is None
    again = scenario_from_dict(problem_to_dict(problem))
    assert again.jobs == problem.jobs


def test_a_missing_workload_names_the_job_before_ray_starts(user_files: Path) -> None:
    problem = load_scenario(_scenario(user_files, "w/nowhere.yaml"))
    with pytest.raises(ConfigError, match=r"jobs\[0\]\.workload.*nowhere\.yaml"):
        execute_emulated(problem, _plan(), config=SiteRunConfig(seed=0, epochs_per_slot=1))


def test_a_given_workload_takes_the_place_of_the_scenarios(user_files: Path) -> None:
    """A workload built already (a manager's job's) replaces the job's file; the jobs given
    the same one share its dry run and its data; the others keep theirs."""
    problem = load_scenario(_scenario(user_files, "w/shapes-npz.yaml"))
    half = workload_from_dict({"model": "digits-cnn", "data_args": {"val_fraction": 0.5}})
    checked = checked_workloads(problem, 0, {"shapes": half, "digits": half})
    assert checked["shapes"] is checked["digits"]  # dry-run once
    assert checked["shapes"].task.input_shape == (1, 8, 8)  # what the dry run found
    data = job_data(problem, 0, checked)
    assert data["shapes"] is data["digits"] and len(data["shapes"].train) == 898
    bad = workload_from_dict({"model": "digits-cnn", "task": {"classes": 7}})
    with pytest.raises(ConfigError, match=r"jobs\[1\]\.workload: task.classes: .*7 classes"):
        checked_workloads(problem, 0, {"digits": bad})


@pytest.mark.ray
def test_sites_run_trains_the_users_model_beside_a_digits_job(user_files: Path) -> None:
    problem = load_scenario(_scenario(user_files, "w/shapes-npz.yaml"))
    run = execute_emulated(problem, _plan(), config=SiteRunConfig(seed=0, epochs_per_slot=2))
    shapes, digits = run.records
    # 120 shapes for training (160, a quarter for validation), all four chunks trained
    assert (shapes.job, shapes.samples) == ("shapes", 120)
    assert (digits.job, digits.samples) == ("digits", 1437)
    shapes_hits = run.final_accuracy["shapes"] * 40  # validated on its own 40 images
    assert shapes_hits == pytest.approx(round(shapes_hits)) and 0 <= shapes_hits <= 40
    assert run.final_accuracy["digits"] > 0.5  # chance is 0.1
