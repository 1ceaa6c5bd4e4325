"""Update jobs with the user's own model and data through the manager's API: a built-in or
``hf:`` model on files in the manager's data folder; ``py:``/``export:`` models, paths out of
the folder and a manager without one are refused with a 422 naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from managerproc import ManagerProcess

from edgewise.jobs.workload import DATA_DIR_ENV
from edgewise.nn.workload.synthetic import make_shapes_folder
from edgewise.service import JobManager, create_app
from edgewise.service.errors import ValidationProblems

JOBS = "/api/v1/jobs"
TOKEN = "test-token-0123456789abcdef"
MOBILENET = {"model": "hf:MobileNetV2Config",
             "model_args": {"depth_multiplier": 0.35, "classifier_dropout_prob": 0.1},
             "batchnorm_momentum": 0.1, "data": "images:shapes", "input_shape": [3, 32, 32],
             "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "val_fraction": 0.25}


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    make_shapes_folder(folder / "shapes", per_class=10, seed=2)  # 30 to train, 10 to validate
    return folder


@pytest.fixture
def client(backend: JobManager, data_folder: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv(DATA_DIR_ENV, str(data_folder))
    with TestClient(create_app(backend, TOKEN),
                    headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield c


def _problem(client: TestClient, workload: dict[str, Any], **spec: Any) -> tuple[str, str]:
    response = client.post(JOBS, json={"kind": "update", "spec": {"workload": workload, **spec}})
    assert response.status_code == 422, response.text
    problem = ValidationProblems.model_validate(response.json()).detail[0]
    return ".".join(str(p) for p in problem.loc), problem.msg


def test_a_workload_on_the_data_folder_is_taken(client: TestClient) -> None:
    created = client.post(JOBS, json={"kind": "update", "spec": {"workload": MOBILENET}})
    assert created.status_code == 201, created.text
    job = client.get(f"{JOBS}/{created.json()['id']}").json()
    assert job["state"] == "pending", job


@pytest.mark.parametrize(("change", "field", "said"), [
    ({"model": "py:evil.py:make"}, "model", "not taken over HTTP"),
    ({"model": "export:prog.pt2"}, "model", "not taken over HTTP"),
    ({"model": "hf:google/mobilenet_v2"}, "model", "Hugging Face Hub"),
    ({"data": "images:../etc"}, "data", "relative to the manager's data folder"),
    ({"data": "npz:/etc/passwd"}, "data", "relative to the manager's data folder"),
    ({"data": "csv:x"}, "data", "digits, images:DIR or npz:FILE"),
    ({"weights": "../w.safetensors"}, "weights", "relative"),
    ({"data": "images:nowhere"}, "workload.data", "no such folder"),
    ({"classes": 7}, "workload.task.classes", "7 classes"),
    ({"weights": "none.safetensors"}, "workload.weights", "none.safetensors"),
])
def test_bad_workloads_are_a_422_naming_the_field(client: TestClient, change: dict[str, Any],
                                                  field: str, said: str) -> None:
    where, message = _problem(client, {**MOBILENET, **change})
    assert where.endswith(field) and said in message, (where, message)
    assert client.get(JOBS).json()["jobs"] == []


def test_shards_must_cover_the_workloads_training_split(client: TestClient) -> None:
    where, message = _problem(client, MOBILENET, workers=["tx2"], shards={"tx2": 1437})
    assert where.endswith("shards") and "30" in message, (where, message)


def test_without_a_data_folder_only_digits_are_taken(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV)
    where, message = _problem(client, MOBILENET)
    assert where.endswith("workload.data") and "no data folder" in message
    digits = {"model": "digits-cnn", "data": "digits"}
    assert client.post(JOBS, json={"kind": "update",
                                   "spec": {"workload": digits}}).status_code == 201


@pytest.mark.ray
@pytest.mark.timeout(400)
def test_the_served_manager_trains_the_workload(manager: ManagerProcess,
                                                data_folder: Path) -> None:
    import shutil

    shutil.copytree(data_folder / "shapes", manager.state_dir / "data" / "shapes")
    # one worker: each worker process imports transformers to build the model (seconds of
    # CPU each); how the samples are shared out is tested on the engine
    job = manager.post(JOBS, {"kind": "update", "spec": {"workload": MOBILENET, "epochs": 2,
                                                         "workers": ["tx2-0"],
                                                         "background_apps": False}})
    done = manager.wait_job(job["id"], timeout_s=300)
    assert done["state"] == "succeeded", done
    plan = manager.get(f"{JOBS}/{job['id']}/plan")
    assert plan["workload"]["train_samples"] == 30 == sum(plan["shards"].values())
    accuracy = manager.get(f"{JOBS}/{job['id']}/metrics")["val_accuracy"]
    assert [row[1] for row in accuracy] == [1.0, 2.0]  # (time, epoch, accuracy) rows
    hits = [row[2] * 10 for row in accuracy]  # validated on the workload's own 10 images
    assert all(0 <= h <= 10 and h == pytest.approx(round(h)) for h in hits), accuracy


def test_a_link_out_of_the_data_folder_is_refused(client: TestClient, data_folder: Path,
                                                  tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    make_shapes_folder(outside, per_class=4, seed=3)
    (data_folder / "sneaky").symlink_to(outside, target_is_directory=True)
    try:
        where, message = _problem(client, {**MOBILENET, "data": "images:sneaky"})
    finally:
        (data_folder / "sneaky").unlink()
    assert where.endswith("workload.data") and "out of the manager's data folder" in message
