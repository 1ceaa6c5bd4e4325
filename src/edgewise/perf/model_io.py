"""Regressor files of the learned performance models: native formats, SHA-256 checked, and
the JSON manifest that lists them.

No file is ever unpickled. LightGBM boosters are saved in LightGBM's text format, XGBoost
boosters in XGBoost's UBJSON format, scikit-learn random forests and extra-trees as plain
JSON arrays of their trees (evaluated here with NumPy exactly as scikit-learn does), and a
constant predictor as a number in the manifest. Every model file's SHA-256 is recorded in the
manifest and verified before the file is parsed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypedDict

from edgewise.errors import ConfigError

if TYPE_CHECKING:
    from edgewise.perf.models import LearnedDevice

__all__ = [
    "MANIFEST_NAME", "ConstantRegressor", "ForestRegressor", "FunctionEntry",
    "LightGBMRegressor", "Manifest", "MapeRow", "Regressor", "XGBoostRegressor",
    "from_estimator", "mape_markdown", "mape_table", "read_manifest", "read_regressor",
    "write_manifest", "write_regressor",
]

Array = NDArray[np.float64]
MANIFEST_NAME = "manifest.json"
_SUFFIX = {"lgbm": ".txt", "xgboost": ".ubj", "rf": ".json", "extra_tree": ".json"}
_FORMAT = {"lgbm": "lightgbm-text", "xgboost": "xgboost-ubjson", "rf": "tree-ensemble-json",
           "extra_tree": "tree-ensemble-json", "constant": "constant"}


class MapeRow(TypedDict):
    """One row of the accuracy table (Deep-Edge Table I); MAPE in percent, ``None`` if no
    held-out target is non-zero."""

    device: str
    function: str
    estimator: str
    train: int
    test: int
    mape_mean: float | None
    mape_std: float | None
    note: str


class Regressor(Protocol):
    """A fitted regressor that reads the columns ``features`` of a DataFrame."""

    @property
    def estimator(self) -> str:
        """FLAML's estimator name ("lgbm", "xgboost", "rf", "extra_tree") or "constant"."""
        ...

    @property
    def features(self) -> tuple[str, ...]:
        """The columns it reads (FLAML drops constant columns, so possibly fewer)."""
        ...

    def predict(self, frame: pd.DataFrame) -> Array:
        """Predict one value per row of ``frame``."""
        ...


@dataclass(frozen=True)
class ConstantRegressor:
    """Predicts ``value`` everywhere; stored for a target that was constant in training."""

    value: float
    estimator: str = "constant"
    features: tuple[str, ...] = ()

    def predict(self, frame: pd.DataFrame) -> Array:
        """Return ``value`` for every row of ``frame``."""
        return np.full(len(frame), self.value, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class LightGBMRegressor:
    """A LightGBM booster, saved in LightGBM's own text format."""

    booster: lgb.Booster
    features: tuple[str, ...]
    estimator: str = "lgbm"

    def predict(self, frame: pd.DataFrame) -> Array:
        """Predict with the booster on the columns ``features`` of ``frame``."""
        x = frame.loc[:, list(self.features)].to_numpy(np.float64)
        return np.asarray(self.booster.predict(x), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class XGBoostRegressor:
    """An XGBoost booster, saved in XGBoost's own UBJSON format."""

    booster: xgb.Booster
    features: tuple[str, ...]
    estimator: str = "xgboost"

    def predict(self, frame: pd.DataFrame) -> Array:
        """Predict with the booster on the columns ``features`` of ``frame``."""
        x = frame.loc[:, list(self.features)].to_numpy(np.float64)
        matrix = xgb.DMatrix(x, feature_names=list(self.features))
        return np.asarray(self.booster.predict(matrix), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class _Tree:
    """One regression tree as scikit-learn stores it; a leaf has ``left == -1``."""

    left: NDArray[np.intp]
    right: NDArray[np.intp]
    feature: NDArray[np.intp]
    threshold: Array
    value: Array

    def predict(self, x: Array) -> Array:
        """Route every row of ``x`` to its leaf; children always follow their parent."""
        node = np.zeros(len(x), dtype=np.intp)
        rows = np.arange(len(x))
        for _ in range(len(self.left)):
            leaf = self.left[node] == -1
            if leaf.all():
                break
            column = np.where(leaf, 0, self.feature[node])
            go_left = x[rows, column] <= self.threshold[node]
            node = np.where(leaf, node, np.where(go_left, self.left[node], self.right[node]))
        return self.value[node]


@dataclass(frozen=True, eq=False)
class ForestRegressor:
    """A scikit-learn random forest or extra-trees ensemble, kept as arrays of its trees."""

    trees: tuple[_Tree, ...]
    features: tuple[str, ...]
    estimator: str = "rf"

    def predict(self, frame: pd.DataFrame) -> Array:
        """Mean of the trees, with inputs rounded to float32 as scikit-learn does."""
        x = frame.loc[:, list(self.features)].to_numpy(np.float32).astype(np.float64)
        total = np.zeros(len(x), dtype=np.float64)
        for tree in self.trees:  # same summation order as scikit-learn with n_jobs=1
            total += tree.predict(x)
        return total / len(self.trees)


def from_estimator(name: str, model: Any) -> Regressor:
    """Wrap the estimator FLAML chose (``automl.model.estimator``) in a saveable regressor.

    Parameters
    ----------
    name : str
        FLAML's estimator name: "lgbm", "xgboost", "rf" or "extra_tree".
    model : Any
        The fitted ``LGBMRegressor``, ``XGBRegressor`` or scikit-learn forest.

    Returns
    -------
    Regressor
        A regressor whose predictions equal the estimator's.

    Raises
    ------
    ValueError
        If ``name`` is not one of the four estimators.
    """
    if name == "lgbm":
        booster = model.booster_
        return LightGBMRegressor(booster, tuple(booster.feature_name()))
    if name == "xgboost":
        booster = model.get_booster()
        return XGBoostRegressor(booster, tuple(booster.feature_names or ()))
    if name in ("rf", "extra_tree"):
        trees = tuple(_Tree(t.tree_.children_left.astype(np.intp),
                            t.tree_.children_right.astype(np.intp),
                            t.tree_.feature.astype(np.intp), t.tree_.threshold.astype(np.float64),
                            t.tree_.value[:, 0, 0].astype(np.float64))
                      for t in model.estimators_)
        return ForestRegressor(trees, tuple(str(f) for f in model.feature_names_in_), name)
    raise ValueError(f"no saveable form for estimator {name!r}")


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
        path.write_text(json.dumps(_forest_to_json(regressor)), encoding="utf-8")
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


def mape_table(models: Mapping[str, LearnedDevice]) -> list[MapeRow]:
    """Table I over several devices: one row per learned function, labelled by the key.

    Parameters
    ----------
    models : Mapping[str, LearnedDevice]
        Fitted or loaded models by label (e.g. "Nano", "TX2").

    Returns
    -------
    list[MapeRow]
        Rows in the order of ``models`` and of each device's functions.
    """
    return [{**row, "device": label} for label, model in models.items() for row in model.mape]


def mape_markdown(rows: Sequence[MapeRow]) -> str:
    """Render MAPE rows as a Markdown table like Deep-Edge's Table I.

    Examples
    --------
    >>> row = {"device": "Nano", "function": "EstComputeTime", "estimator": "lgbm",
    ...        "train": 1386, "test": 264, "mape_mean": 1.668, "mape_std": 2.074, "note": ""}
    >>> print(mape_markdown([row]).splitlines()[2])
    | Nano | EstComputeTime | 1386/264 | lgbm | 1.668 ± 2.074 |  |
    """
    lines = ["| Device | Function | Data-points (train/test) | Estimator | MAPE (%) | Note |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        mape = "—" if r["mape_mean"] is None else f"{r['mape_mean']:.3f} ± {r['mape_std']:.3f}"
        lines.append(f"| {r['device']} | {r['function']} | {r['train']}/{r['test']} | "
                     f"{r['estimator']} | {mape} | {r['note']} |")
    return "\n".join(lines) + "\n"


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
        return _forest_from_json(json.loads(path.read_text(encoding="utf-8")), estimator)
    raise ValueError(f"unknown estimator {estimator!r}")


def _forest_to_json(forest: ForestRegressor) -> dict[str, Any]:
    return {"format": "tree-ensemble-json", "features": list(forest.features),
            "trees": [{"left": t.left.tolist(), "right": t.right.tolist(),
                       "feature": t.feature.tolist(), "threshold": t.threshold.tolist(),
                       "value": t.value.tolist()} for t in forest.trees]}


def _forest_from_json(data: dict[str, Any], estimator: str) -> ForestRegressor:
    features = tuple(str(f) for f in data["features"])
    trees = tuple(_tree_from_json(t, len(features)) for t in data["trees"])
    if not trees:
        raise ValueError("a forest without trees")
    return ForestRegressor(trees, features, estimator)


def _tree_from_json(data: dict[str, Any], n_features: int) -> _Tree:
    tree = _Tree(np.asarray(data["left"], dtype=np.intp), np.asarray(data["right"], dtype=np.intp),
                 np.asarray(data["feature"], dtype=np.intp),
                 np.asarray(data["threshold"], dtype=np.float64),
                 np.asarray(data["value"], dtype=np.float64))
    n = len(tree.left)
    split = tree.left != -1
    index = np.arange(n)
    if n == 0 or any(len(a) != n for a in (tree.right, tree.feature, tree.threshold, tree.value)) \
            or np.any(split & ((tree.left <= index) | (tree.right <= index)
                               | (tree.left >= n) | (tree.right >= n)
                               | (tree.feature < 0) | (tree.feature >= n_features))):
        raise ValueError("malformed tree")
    return tree


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
