"""Saving and loading learned performance models: native regressor files, SHA-256 checked,
and the JSON manifest that lists them.

No file is ever unpickled. LightGBM boosters are saved in LightGBM's text format, XGBoost
boosters in XGBoost's UBJSON format, scikit-learn random forests and extra-trees as plain
JSON arrays of their trees, and a constant predictor as a number in the manifest. Every model
file's SHA-256 is recorded in the manifest and verified before the file is parsed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import lightgbm as lgb
import xgboost as xgb
from pydantic import BaseModel, ConfigDict, ValidationError

from edgewise.errors import ConfigError
from edgewise.perf.learned import FUNCTIONS, LearnedDevice, MapeRow, schema_features
from edgewise.perf.regressors import (
    ConstantRegressor,
    ForestRegressor,
    LightGBMRegressor,
    Regressor,
    XGBoostRegressor,
    forest_from_json,
    forest_to_json,
)

__all__ = [
    "MANIFEST_NAME", "FunctionEntry", "Manifest", "load", "read_manifest", "read_regressor",
    "save", "write_manifest", "write_regressor",
]  # fmt: skip

MANIFEST_NAME = "manifest.json"
_SUFFIX = {"lgbm": ".txt", "xgboost": ".ubj", "rf": ".json", "extra_tree": ".json"}
_FORMAT = {"lgbm": "lightgbm-text", "xgboost": "xgboost-ubjson", "rf": "tree-ensemble-json",
           "extra_tree": "tree-ensemble-json", "constant": "constant"}



class FunctionEntry(BaseModel):
    """One learned function in the manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    features: tuple[str, ...]
    used_features: tuple[str, ...]
    estimator: str
    format: str
    file: str | None = None
    sha256: str | None = None
    constant: float | None = None


class Manifest(BaseModel):
    """``manifest.json``: what was fitted, for which device, with which features and libraries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["edgewise-perf-models"] = "edgewise-perf-models"
    format_version: Literal[1] = 1
    device_type: str
    trained_at: str
    versions: dict[str, str]
    trust: str = ("model files are parsed as data (LightGBM text, XGBoost UBJSON, JSON); "
                  "none is unpickled, and each is checked against its SHA-256 before parsing")
    functions: dict[str, FunctionEntry]
    mape: list[MapeRow]


def write_regressor(directory: Path, key: str, regressor: Regressor,
                    features: tuple[str, ...]) -> FunctionEntry:
    """Write one regressor's file (none for a constant) and return its manifest entry."""
    name = regressor.estimator
    if isinstance(regressor, ConstantRegressor):
        return FunctionEntry(features=features, used_features=(), estimator=name,
                             format=_FORMAT[name], constant=regressor.value)
    path = directory / (re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_") + _SUFFIX[name])
    if isinstance(regressor, (LightGBMRegressor, XGBoostRegressor)):
        regressor.booster.save_model(str(path))
    elif isinstance(regressor, ForestRegressor):
        path.write_text(json.dumps(forest_to_json(regressor)), encoding="utf-8")
    else:
        raise TypeError(f"cannot save a {type(regressor).__name__}")
    return FunctionEntry(features=features, used_features=regressor.features, estimator=name,
                         format=_FORMAT[name], file=path.name, sha256=_sha256(path))


def read_regressor(directory: Path, key: str, entry: FunctionEntry) -> Regressor:
    """Verify and parse one regressor named by a manifest entry.

    Raises
    ------
    ConfigError
        If the file is missing, its name is not a plain file name, its SHA-256 differs from
        the manifest's, or its content does not match the entry.
    """
    if entry.estimator == "constant":
        if entry.constant is None:
            raise ConfigError("constant predictor without a value", field=f"functions.{key}")
        return ConstantRegressor(entry.constant)
    path = _checked_path(directory, key, entry)
    try:
        regressor = _parse(path, entry.estimator)
    except (ValueError, KeyError, TypeError, lgb.basic.LightGBMError, xgb.core.XGBoostError) as exc:
        raise ConfigError(f"unreadable model file: {exc}", source=str(path)) from exc
    if regressor.features != entry.used_features:
        raise ConfigError(f"file reads {regressor.features}, manifest says {entry.used_features}",
                          source=str(path), field=f"functions.{key}.used_features")
    return regressor


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    """Write ``manifest.json`` last, through a temporary file, so a half-written save is
    never taken for a complete one."""
    path = directory / MANIFEST_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(directory: Path, device_type: str,
                  schema: Callable[[str], tuple[str, ...] | None]) -> Manifest:
    """Read ``manifest.json`` and refuse it for another device type or another feature schema.

    Parameters
    ----------
    directory : Path
        A directory written by ``models.save``.
    device_type : str
        The device type the caller will apply the models to.
    schema : Callable[[str], tuple[str, ...] | None]
        The current features of a learned function, ``None`` for an unknown function.

    Raises
    ------
    ConfigError
        Naming the file and the field: unreadable manifest, models fitted for another device
        type (a model fitted for jetson-nano is never applied to jetson-tx2), or a function
        whose features differ from the current schema (refit the models).
    """
    path = directory / MANIFEST_NAME
    try:
        manifest = Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ConfigError("no manifest: not a saved model directory", source=str(path)) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(first["msg"], source=str(path), field=field) from exc
    if manifest.device_type != device_type:
        raise ConfigError(f"models fitted for {manifest.device_type} are never applied to "
                          f"{device_type}", source=str(path), field="device_type")
    for key, entry in manifest.functions.items():
        expected = schema(key)
        if entry.features != expected or not set(entry.used_features) <= set(entry.features):
            raise ConfigError(f"fitted with features {entry.features}, the current schema has "
                              f"{expected}: refit", source=str(path),
                              field=f"functions.{key}.features")
    return manifest



def save(model: LearnedDevice, directory: Path | str) -> Path:
    """Save ``model`` as ``directory/manifest.json`` plus one native file per regressor.

    Parameters
    ----------
    model : LearnedDevice
        Fitted models of one device type.
    directory : Path or str
        Created if absent; files of the same names are overwritten.

    Returns
    -------
    Path
        The manifest, written last.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries = {key: write_regressor(directory, key, reg, model.features[key])
               for key, reg in model.regressors.items()}
    return write_manifest(directory, Manifest(
        device_type=model.device_type, trained_at=model.trained_at,
        versions=dict(model.versions), functions=entries, mape=list(model.mape)))


def load(directory: Path | str, device_type: str) -> LearnedDevice:
    """Load models saved by :func:`save`, only for the device type they were fitted for.

    Parameters
    ----------
    directory : Path or str
        A directory written by :func:`save`.
    device_type : str
        The device type the models will be applied to.

    Returns
    -------
    LearnedDevice
        Predicting exactly what the saved models predicted.

    Raises
    ------
    ConfigError
        Another device type, another feature schema, a missing function, or a model file
        whose SHA-256 differs from the manifest's; the error names the file and the field.
    """
    directory = Path(directory)
    manifest = read_manifest(directory, device_type, schema_features)
    missing = [key for key in FUNCTIONS if key not in manifest.functions]
    if missing:
        raise ConfigError(f"manifest lacks {missing}", source=str(directory), field="functions")
    regressors = {key: read_regressor(directory, key, entry)
                  for key, entry in manifest.functions.items()}
    return LearnedDevice(manifest.device_type, regressors,
                         {key: entry.features for key, entry in manifest.functions.items()},
                         tuple(manifest.mape), manifest.trained_at, manifest.versions)


def _checked_path(directory: Path, key: str, entry: FunctionEntry) -> Path:
    if entry.file is None or entry.sha256 is None or Path(entry.file).name != entry.file \
            or entry.file.startswith("."):
        raise ConfigError("needs a plain file name and a sha256", field=f"functions.{key}.file")
    path = directory / entry.file
    if not path.is_file():
        raise ConfigError("model file missing", source=str(path))
    if _sha256(path) != entry.sha256:
        raise ConfigError("SHA-256 differs from the manifest's: file changed since it was saved",
                          source=str(path), field=f"functions.{key}.sha256")
    return path


def _parse(path: Path, estimator: str) -> Regressor:
    if estimator == "lgbm":
        booster = lgb.Booster(model_file=str(path))
        return LightGBMRegressor(booster, tuple(booster.feature_name()))
    if estimator == "xgboost":
        xbooster = xgb.Booster()
        xbooster.load_model(str(path))
        return XGBoostRegressor(xbooster, tuple(xbooster.feature_names or ()))
    if estimator in ("rf", "extra_tree"):
        return forest_from_json(json.loads(path.read_text(encoding="utf-8")), estimator)
    raise ValueError(f"unknown estimator {estimator!r}")



def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
