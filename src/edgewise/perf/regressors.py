"""The saveable regressors of the learned performance models: LightGBM and XGBoost boosters,
scikit-learn forests kept as arrays of their trees (evaluated here with NumPy exactly as
scikit-learn does), and constants; never pickled (``perf.model_io`` writes and reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb
from numpy.typing import NDArray

__all__ = [
    "Columns", "ConstantRegressor", "ForestRegressor", "LightGBMRegressor", "Regressor",
    "XGBoostRegressor", "forest_from_json", "forest_to_json", "from_estimator",
]  # fmt: skip

Array = NDArray[np.float64]


Columns: TypeAlias = pd.DataFrame | Mapping[str, Array]
"""The rows to predict: a DataFrame, or equally long arrays by column name (no DataFrame to
build for the planner's many calls of a few rows)."""


class Regressor(Protocol):
    """A fitted regressor that reads the columns ``features`` of a table."""

    @property
    def estimator(self) -> str:
        """FLAML's estimator name ("lgbm", "xgboost", "rf", "extra_tree") or "constant"."""
        ...

    @property
    def features(self) -> tuple[str, ...]:
        """The columns it reads (FLAML drops constant columns, so possibly fewer)."""
        ...

    def predict(self, frame: Columns) -> Array:
        """Predict one value per row of ``frame``."""
        ...


def _n_rows(frame: Columns) -> int:
    if isinstance(frame, pd.DataFrame):
        return len(frame)
    return len(next(iter(frame.values()))) if frame else 0


def _matrix(frame: Columns, features: tuple[str, ...]) -> Array:
    """The columns ``features`` of ``frame`` as a float64 matrix (column by column: the
    planner's calls have a few rows, where ``frame.loc`` costs more than the prediction)."""
    if not features:
        return np.empty((_n_rows(frame), 0))
    return np.column_stack([np.asarray(frame[c], dtype=np.float64) for c in features])


@dataclass(frozen=True)
class ConstantRegressor:
    """Predicts ``value`` everywhere; stored for a target that was constant in training."""

    value: float
    estimator: str = "constant"
    features: tuple[str, ...] = ()

    def predict(self, frame: Columns) -> Array:
        """Return ``value`` for every row of ``frame``."""
        return np.full(_n_rows(frame), self.value, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class LightGBMRegressor:
    """A LightGBM booster, saved in LightGBM's own text format."""

    booster: lgb.Booster
    features: tuple[str, ...]
    estimator: str = "lgbm"

    def predict(self, frame: Columns) -> Array:
        """Predict with the booster on the columns ``features`` of ``frame``, on one thread
        (the planner predicts a few rows at a time: OpenMP's start-up would dominate)."""
        return np.asarray(self.booster.predict(_matrix(frame, self.features), num_threads=1),
                          dtype=np.float64)


@dataclass(frozen=True, eq=False)
class XGBoostRegressor:
    """An XGBoost booster, saved in XGBoost's own UBJSON format."""

    booster: xgb.Booster
    features: tuple[str, ...]
    estimator: str = "xgboost"

    def __post_init__(self) -> None:
        self.booster.set_param({"nthread": 1})  # a few rows per call: threads cost more

    def predict(self, frame: Columns) -> Array:
        """Predict with the booster on the columns ``features`` of ``frame`` (in place, no
        DMatrix: the same values, a tenth of the time for the planner's small calls)."""
        return np.asarray(self.booster.inplace_predict(_matrix(frame, self.features)),
                          dtype=np.float64)


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

    def predict(self, frame: Columns) -> Array:
        """Mean of the trees, with inputs rounded to float32 as scikit-learn does."""
        x = _matrix(frame, self.features).astype(np.float32).astype(np.float64)
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



def forest_to_json(forest: ForestRegressor) -> dict[str, Any]:
    """The forest as plain JSON data: its feature names and each tree's arrays."""
    return {"format": "tree-ensemble-json", "features": list(forest.features),
            "trees": [{"left": t.left.tolist(), "right": t.right.tolist(),
                       "feature": t.feature.tolist(), "threshold": t.threshold.tolist(),
                       "value": t.value.tolist()} for t in forest.trees]}


def forest_from_json(data: dict[str, Any], estimator: str) -> ForestRegressor:
    """The forest of :func:`forest_to_json`'s data; ValueError if a tree is malformed (a child
    index not after its parent or out of range, a feature index out of range)."""
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


