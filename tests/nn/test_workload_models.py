"""Every model kind builds into a module returning logits; a hub name never reaches the
network; ``export:`` programs load without unpickling; weights load strictly."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.models import DigitsCNN
from edgewise.nn.workload import (
    Logits,
    build_model,
    build_network,
    example_input,
    load_weights,
    save_weights,
    unwrap,
    validate,
    workload_from_dict,
)
from edgewise.nn.workload.exported import load_export
from edgewise.nn.workload.offline import OFFLINE_ENV


def _workload(**doc: Any) -> Any:
    return workload_from_dict({"data": None, **doc})


def test_builtin_digits_cnn_is_the_plain_module() -> None:
    model = build_network(_workload(model="digits-cnn"), num_classes=10)
    assert isinstance(model, DigitsCNN)
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 10)


def test_zoo_name_builds_and_returns_a_tensor() -> None:
    workload = _workload(model="nasnet-toy")
    out = build_network(workload)(example_input(workload, batch=2))
    assert isinstance(out, torch.Tensor) and out.shape == (2, 10)


def test_hf_config_class_fills_labels_and_image_size() -> None:
    workload = _workload(model="hf:MobileNetV2Config", model_args={"depth_multiplier": 0.25},
                         task={"input_shape": [3, 32, 32]})
    model = build_network(workload, num_classes=4, input_shape=(3, 32, 32))
    assert isinstance(model, Logits) and model.input_name == "pixel_values"
    inner: Any = unwrap(model)
    assert inner.config.num_labels == 4 and inner.config.image_size == 32
    assert model(example_input(workload, batch=2)).shape == (2, 4)


def test_batchnorm_momentum_replaces_every_layers() -> None:
    doc = {"model": "hf:MobileNetV2Config", "model_args": {"depth_multiplier": 0.25}}
    default = build_network(_workload(**doc), num_classes=2)
    norms = [m for m in default.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms and all(m.momentum == 0.997 for m in norms)  # transformers' TF-style value
    tuned = build_network(_workload(**doc, batchnorm_momentum=0.1), num_classes=2)
    assert all(m.momentum == 0.1 for m in tuned.modules() if isinstance(m, nn.BatchNorm2d))


def test_hf_given_num_labels_is_kept() -> None:
    workload = _workload(model="hf:MobileNetV2Config",
                         model_args={"depth_multiplier": 0.25, "num_labels": 7})
    assert unwrap(build_network(workload, num_classes=4)).config.num_labels == 7  # type: ignore[union-attr]


@pytest.mark.parametrize(("model", "args", "field", "says"), [
    ("hf:NoSuchConfig", {}, "model", "no config class"),
    ("hf:MobileNetV2Config", {"depth_multiplier": "wide"}, "model_args", "MobileNetV2Config"),
    ("hf:GPT2Config", {"n_layer": 1}, "model", None),
])
def test_hf_errors(model: str, args: dict[str, Any], field: str, says: str | None) -> None:
    try:
        build_network(_workload(model=model, model_args=args), num_classes=2,
                      input_shape=(3, 32, 32))
    except ConfigError as exc:
        assert exc.field == field and (says is None or says in str(exc))
    else:  # GPT-2 has a sequence-classification head: it builds
        assert model == "hf:GPT2Config"


def test_py_factory_from_a_file(user_model: Path) -> None:
    model = build_network(_workload(model=f"py:{user_model}:make", model_args={"classes": 3}))
    assert model(torch.zeros(2, 3, 8, 8)).shape == (2, 3)  # the dict output is unwrapped


def test_py_factory_from_a_dotted_module() -> None:
    model = build_network(_workload(model="py:edgewise.nn.zoo:NasNetToy",
                                    model_args={"n_classes": 5}))
    assert model(torch.zeros(1, 3, 8, 8)).shape == (1, 5)


@pytest.mark.parametrize(("ref", "args", "field", "says"), [
    ("py:no.such.module:make", {}, "model", "cannot import"),
    ("py:{file}:missing", {}, "model", "no callable"),
    ("py:{file}:not_a_model", {}, "model", "not a torch.nn.Module"),
    ("py:{file}:make", {"colour": "red"}, "model_args", "colour"),
    ("py:/no/such/file.py:make", {}, "model", "no such file"),
])
def test_py_errors(user_model: Path, ref: str, args: dict[str, Any], field: str,
                   says: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_network(_workload(model=ref.format(file=user_model), model_args=args))
    assert info.value.field == field and says in str(info.value)


@pytest.mark.parametrize("model", ["hf:no/such-model", "google/vit-base-patch16-224",
                                   "hf:google/mobilenet_v2_1.0_224"])
def test_hub_name_is_refused_before_any_network_access(
        no_network: list[Any], model: str) -> None:
    attempts = no_network
    with pytest.raises(ConfigError) as info:
        validate(workload_from_dict({"model": model}))
    assert info.value.field == "model" and "nothing is downloaded" in str(info.value)
    assert attempts == []


def test_hf_build_sets_offline_and_never_connects(monkeypatch: pytest.MonkeyPatch,
                                                 no_network: list[Any]) -> None:
    attempts = no_network
    for key in OFFLINE_ENV:
        monkeypatch.delenv(key, raising=False)
    workload = _workload(model="hf:MobileNetV2Config", model_args={"depth_multiplier": 0.25})
    build_network(workload, num_classes=2, input_shape=(3, 32, 32))
    import os

    assert all(os.environ[k] == v for k, v in OFFLINE_ENV.items())
    assert attempts == []


def _exported(tmp_path: Path) -> tuple[Path, nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()
    x = torch.randn(2, 3, 8, 8)
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(model, (x,)), path)
    return path, model, x


def test_export_program_loads_and_matches(tmp_path: Path) -> None:
    path, model, x = _exported(tmp_path)
    workload = _workload(model=f"export:{path}")
    loaded = build_network(workload)
    assert torch.allclose(loaded(x), model(x), atol=1e-6)
    assert example_input(workload, batch=2).shape == (2, 3, 8, 8)


def test_export_with_pickled_payload_is_refused(tmp_path: Path) -> None:
    path, _, _ = _exported(tmp_path)
    tampered = tmp_path / "t.pt2"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tampered, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("model_weights_config.json"):
                data = data.replace(b'"use_pickle": false', b'"use_pickle": true', 1)
            dst.writestr(item, data)
    with pytest.raises(ConfigError, match="pickled"):
        load_export(tampered)
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="archive"):
        load_export(tmp_path / "junk.pt2")


def test_weights_round_trip_and_strict_loading(tmp_path: Path, user_model: Path) -> None:
    workload = _workload(model=f"py:{user_model}:make")
    trained = build_network(workload, seed=1)
    path = save_weights(trained, tmp_path / "w.safetensors")
    fresh = build_network(workload, seed=2)
    load_weights(fresh, path)
    x = torch.randn(3, 3, 8, 8)
    assert torch.equal(fresh.eval()(x), trained.eval()(x))
    with_weights = workload_from_dict({"model": f"py:{user_model}:make", "data": None,
                                       "weights": str(path)})
    assert torch.equal(build_model(with_weights).eval()(x), trained(x))


def test_weights_that_do_not_fit_list_the_names(tmp_path: Path, user_model: Path) -> None:
    path = save_weights(nn.Sequential(nn.Linear(2, 2)), tmp_path / "other.safetensors")
    with pytest.raises(ConfigError) as info:
        load_weights(build_network(_workload(model=f"py:{user_model}:make")), path)
    text = str(info.value)
    assert info.value.field == "weights"
    assert "missing 8: body.0.bias, body.0.weight" in text and "and 2 more" in text
    assert "unexpected 2: 0.bias, 0.weight" in text


def test_weights_with_wrong_shapes_or_format(tmp_path: Path, user_model: Path) -> None:
    wide = build_network(_workload(model=f"py:{user_model}:make", model_args={"width": 16}))
    path = save_weights(wide, tmp_path / "wide.safetensors")
    narrow = build_network(_workload(model=f"py:{user_model}:make"))
    with pytest.raises(ConfigError, match="shapes"):
        load_weights(narrow, path)
    (tmp_path / "model.pt").write_bytes(b"\x80\x04pickle")
    with pytest.raises(ConfigError, match="never loaded"):
        load_weights(narrow, tmp_path / "model.pt")
    (tmp_path / "bad.safetensors").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="not a readable safetensors"):
        load_weights(narrow, tmp_path / "bad.safetensors")
