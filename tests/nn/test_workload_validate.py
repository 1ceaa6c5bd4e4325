"""The dry run before any actor starts: one batch through the model on the driver; every
problem is one line naming its field."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.workload import (
    build_model,
    resolved,
    save_weights,
    validate,
    workload_from_dict,
)


def _doc(shapes_dir: Path, user_model: Path, **over: Any) -> dict[str, Any]:
    return {"model": f"py:{user_model}:make", "data": f"images:{shapes_dir}",
            "task": {"input_shape": [3, 16, 16]}, **over}


def test_dry_run_of_a_good_workload(shapes_dir: Path, user_model: Path) -> None:
    workload = workload_from_dict(_doc(shapes_dir, user_model))
    small = validate(workload, batch_size=8)
    large = validate(workload, batch_size=64)
    assert (small.train_samples, small.val_samples) == (38, 10)
    assert small.input_shape == (3, 16, 16) and small.num_classes == 4
    assert small.parameters == sum(p.numel() for p in build_model(workload).parameters())
    assert large.memory_mb > small.memory_mb > small.parameters * 16 / 2**20
    done = resolved(workload, small)
    assert done.task.num_classes == 4 and done.task.input_shape == (3, 16, 16)


def test_digits_default_passes() -> None:
    dry = validate(workload_from_dict({"model": "digits-cnn"}))
    assert (dry.train_samples, dry.val_samples, dry.num_classes) == (1437, 360, 10)


def _fails(doc: dict[str, Any], field: str, says: str, **kwargs: Any) -> None:
    with pytest.raises(ConfigError) as info:
        validate(workload_from_dict(doc, "w.yaml"), **kwargs)
    assert info.value.field == field, str(info.value)
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_classes_that_disagree_with_the_folders(shapes_dir: Path, user_model: Path) -> None:
    task = {"input_shape": [3, 16, 16]}
    _fails(_doc(shapes_dir, user_model, task={**task, "classes": 5}), "task.classes",
           "the task has 5 classes, the data 4")
    _fails(_doc(shapes_dir, user_model, task={**task, "classes": ["circle", "cat"]}),
           "task.classes", "no folder for ['cat']")


def test_model_output_not_matching_the_classes(shapes_dir: Path, user_model: Path) -> None:
    _fails(_doc(shapes_dir, user_model, model_args={"classes": 3}), "task.classes",
           "outputs shape [8, 3]")


def test_model_that_cannot_take_the_input(shapes_dir: Path) -> None:
    doc = {"model": "digits-cnn", "data": f"images:{shapes_dir}",
           "task": {"input_shape": [3, 16, 16]}}
    _fails(doc, "task.input_shape", "cannot take a batch of shape [8, 3, 16, 16]")


def test_missing_files(tmp_path: Path, user_model: Path, shapes_dir: Path) -> None:
    _fails(_doc(shapes_dir, user_model, weights=str(tmp_path / "w.safetensors")), "weights",
           "no such file")
    _fails({"model": "digits-cnn", "data": f"npz:{tmp_path}/none.npz"}, "data", "no such file")
    _fails({"model": "digits-cnn", "data": f"images:{tmp_path}/none"}, "data", "no such folder")
    _fails({"model": f"export:{tmp_path}/none.pt2"}, "model", "no such file")


def test_corrupt_image_and_empty_class(tmp_path: Path, shapes_dir: Path,
                                       user_model: Path) -> None:
    root = tmp_path / "pics"
    shutil.copytree(shapes_dir, root)
    (root / "square" / "zz.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    _fails(_doc(root, user_model), "data", f"corrupt image {root / 'square' / 'zz.jpg'}")
    (root / "square" / "zz.jpg").unlink()
    (root / "hexagon").mkdir()
    _fails(_doc(root, user_model), "data", "empty class folder")


def test_weights_that_do_not_fit(tmp_path: Path, shapes_dir: Path, user_model: Path) -> None:
    path = save_weights(nn.Linear(3, 4), tmp_path / "w.safetensors")
    _fails(_doc(shapes_dir, user_model, weights=str(path)), "weights", "unexpected 2: bias, weight")


def test_export_programs_are_inference_only(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10)).eval()
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(model, (torch.zeros(1, 1, 8, 8),)), path)
    _fails({"model": f"export:{path}"}, "model", "inference only")
    assert validate(workload_from_dict({"model": f"export:{path}"}), training=False).num_classes \
        == 10


def test_not_enough_memory(shapes_dir: Path, user_model: Path) -> None:
    _fails(_doc(shapes_dir, user_model), "batch_size", "a worker has 0 MB", memory_mb=0.01)


def test_npz_shape_and_labels(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=np.zeros((96, 1, 8, 8), np.float32),
             y=np.arange(96) % 12)
    doc = {"model": "digits-cnn", "data": f"npz:{tmp_path}/d.npz"}
    _fails({**doc, "model_args": {"n_classes": 10}}, "task.classes", "outputs shape [8, 10]")
    _fails({**doc, "task": {"classes": 10}}, "task.classes", "labels go up to 11")
    _fails({**doc, "task": {"input_shape": [1, 4, 4]}}, "task.input_shape",
           "the data's samples are [1, 8, 8]")
    assert validate(workload_from_dict(doc)).num_classes == 12  # the head follows the data


def test_mean_and_std_must_match(shapes_dir: Path, user_model: Path) -> None:
    _fails(_doc(shapes_dir, user_model, data_args={"mean": [0.5, 0.5], "std": [0.5]}),
           "data_args.std", "same number")
