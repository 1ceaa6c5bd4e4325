"""Learned performance and interference models of one device type (Deep-Edge §IV-C1, §V-B)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from flaml.automl import AutoML
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.perf.model_io import (
    ConstantRegressor,
    Manifest,
    MapeRow,
    Regressor,
    from_estimator,
    mape_markdown,
    mape_table,
    read_manifest,
    read_regressor,
    write_manifest,
    write_regressor,
)
from edgewise.perf.schema import (
    COLUMNS,
    COMPUTE_FEATURES,
    EXEC_FEATURES,
    STATE_COLUMNS,
    STATE_FEATURES,
    UPDATE_FEATURES,
    PerfModel,
)

__all__ = [
    "ESTIMATORS", "FUNCTIONS", "MIN_ROWS", "LearnedDevice", "MapeRow", "exec_key", "fit_models",
    "get_max_batch_size", "held_out", "load", "mape_markdown", "mape_table", "save",
]

Array = NDArray[np.float64]

# Learned function -> (profile target column, features); EstExecTime is added per app kind.
FUNCTIONS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "EstComputeTime": ("compute_s_per_sample", COMPUTE_FEATURES),
    "EstUpdateTime": ("update_s", UPDATE_FEATURES),
    **{f"EstState^{r}": (f"new_{r}", STATE_FEATURES) for r in STATE_COLUMNS},
}
EXEC_TARGET = "app_exec_ms"
ESTIMATORS = ("lgbm", "xgboost", "rf", "extra_tree")
MIN_ROWS = 40  # per learned function: enough for FLAML's cross-validation and a test split
_MIN_TIME = 1e-9  # predicted times are clamped to at least this (seconds or ms)
_LIBRARIES = ("flaml", "lightgbm", "xgboost", "scikit-learn", "numpy", "pandas")


def exec_key(app_kind: str) -> str:
    """Name of the EstExecTime function of one background app, e.g. ``EstExecTime[sift]``."""
    return f"EstExecTime[{app_kind}]"


@dataclass(eq=False)
class LearnedDevice:
    """The learned functions of one device type; implements :class:`PerfModel`.

    Not frozen because ``PerfModel`` declares ``device_type`` as a settable attribute.

    Parameters
    ----------
    device_type : str
        Catalog name the profile was measured on; the models are never applied to another.
    regressors : Mapping[str, Regressor]
        One regressor per learned function (see :data:`FUNCTIONS` and :func:`exec_key`).
    features : Mapping[str, tuple[str, ...]]
        The schema features of each function, in the order they were fitted.
    mape : tuple[MapeRow, ...]
        Held-out accuracy of each function (Table I).
    trained_at : str
        ISO-8601 UTC time of fitting.
    versions : Mapping[str, str]
        Versions of Python and of the libraries that fitted the models.
    """

    device_type: str
    regressors: Mapping[str, Regressor]
    features: Mapping[str, tuple[str, ...]]
    mape: tuple[MapeRow, ...]
    trained_at: str
    versions: Mapping[str, str]

    @property
    def app_kinds(self) -> tuple[str, ...]:
        """Background apps with a fitted EstExecTime."""
        return tuple(k[len("EstExecTime["):-1] for k in self.regressors if k.startswith("EstExec"))

    def compute_time(self, state: Array, batch: Array) -> Array:
        """EstComputeTime: seconds per sample (Eq. 5), at least ``1e-9``."""
        cols = _state_cols(state) | {"batch_size": _rows(batch, len(state))}
        return np.maximum(self._predict("EstComputeTime", cols), _MIN_TIME)

    def update_time(self, state: Array, batch: Array, batch_mean: Array, ps_cpu: Array,
                    n_workers: Array) -> Array:
        """EstUpdateTime: push + update + pull seconds per batch (Eq. 6), at least ``1e-9``."""
        n = len(state)
        cols = _state_cols(state) | {"batch_size": _rows(batch, n), "batch_mean":
                                     _rows(batch_mean, n), "ps_cpu": _rows(ps_cpu, n),
                                     "n_workers": _rows(n_workers, n)}
        return np.maximum(self._predict("EstUpdateTime", cols), _MIN_TIME)

    def new_state(self, state: Array, batch: Array) -> Array:
        """EstState: the (n, 3) state while training (Eq. 7), each output clipped to [0, 100]."""
        cols = _state_cols(state) | {"batch_size": _rows(batch, len(state))}
        out = [self._predict(f"EstState^{r}", cols) for r in STATE_COLUMNS]
        return np.clip(np.column_stack(out), 0.0, 100.0)

    def exec_time(self, app_kind: str, new_state: Array) -> Array:
        """EstExecTime: ms per period of ``app_kind`` at ``new_state`` (Eq. 8), at least 1e-9.

        Raises
        ------
        ConfigError
            If no EstExecTime was fitted for ``app_kind`` on this device type.
        """
        if exec_key(app_kind) not in self.regressors:
            raise ConfigError(f"no EstExecTime fitted for {app_kind!r} on {self.device_type}; "
                              f"fitted: {list(self.app_kinds)}", field="app_kind")
        s = np.asarray(new_state, dtype=np.float64).reshape(-1, 3)
        cols = {name: s[:, i] for i, name in enumerate(EXEC_FEATURES)}
        return np.maximum(self._predict(exec_key(app_kind), cols), _MIN_TIME)

    def _predict(self, key: str, columns: Mapping[str, Array]) -> Array:
        frame = pd.DataFrame({name: columns[name] for name in self.features[key]})
        return from_target(key, columns, self.regressors[key].predict(frame))


def to_target(key: str, features: Mapping[str, Array], y: Array) -> Array:
    """What each function is fitted to: EstState^r learns the change new_r − r, which trees
    extrapolate to states the profile never reached (the new memory of a large batch on a
    loaded device); times learn log(y), so errors are relative, as MAPE measures them."""
    if key.startswith("EstState^"):
        return y - features[key.removeprefix("EstState^")]
    return np.log(np.maximum(y, _MIN_TIME))


def from_target(key: str, features: Mapping[str, Array], z: Array) -> Array:
    """The inverse of :func:`to_target`."""
    if key.startswith("EstState^"):
        return np.asarray(features[key.removeprefix("EstState^")], dtype=np.float64) + z
    return np.exp(z)


def fit_models(profile: pd.DataFrame, device_type: str, *, time_budget_s: float | None = 10.0,
               seed: int = 0, test_fraction: float = 0.16,
               max_trials: int | None = None) -> LearnedDevice:
    """Fit every learned function of one device type by AutoML (FLAML), as Deep-Edge does
    with H2O.

    Each function gets its own FLAML run of ``time_budget_s`` seconds over LightGBM,
    XGBoost, random forest and extra-trees, minimising MAPE, with one thread. A target that
    is constant on the training rows (``new_gpu`` on a device without a GPU) gets a constant
    predictor instead. EstExecTime is fitted once per non-empty ``app_kind``.

    Parameters
    ----------
    profile : pandas.DataFrame
        Profile rows with every column of ``schema.COLUMNS``, all of ``device_type``.
    device_type : str
        Catalog name of the device the profile was measured on.
    time_budget_s : float or None
        Search time per learned function, seconds; ``None``: no time limit (then
        ``max_trials`` is required).
    seed : int
        Seeds the train/test split and FLAML's search.
    test_fraction : float
        Share of rows held out to measure MAPE (Table I holds out 16 %).
    max_trials : int or None
        Stop each search after this many trials (FLAML's ``max_iter``).

    Returns
    -------
    LearnedDevice
        The fitted models and their held-out MAPE table.

    Raises
    ------
    ConfigError
        Missing columns, rows of another device type, non-finite values or fewer than
        :data:`MIN_ROWS` rows for a function, or invalid search settings; the error names
        the field.

    Notes
    -----
    The split is the same for the same seed. A search bounded by wall time may choose
    another model on a slower or busier machine; with ``time_budget_s=None`` and
    ``max_trials`` set, the same seed gives the same models.
    """
    _check_profile(profile, device_type)
    _check_settings(time_budget_s, max_trials, test_fraction)
    budget = -1.0 if time_budget_s is None else time_budget_s  # FLAML: -1 is no limit
    regressors: dict[str, Regressor] = {}
    features: dict[str, tuple[str, ...]] = {}
    rows: list[MapeRow] = []
    for key, target, feats, frame in list(_function_frames(profile)):  # check all, then fit
        regressors[key], row = _fit_one(key, frame, target, feats, (budget, max_trials), seed,
                                        test_fraction)
        features[key] = feats
        rows.append({**row, "device": device_type})
    return LearnedDevice(device_type, regressors, features, tuple(rows),
                         datetime.now(UTC).isoformat(timespec="seconds"), _versions())


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
    manifest = read_manifest(directory, device_type, _schema_features)
    missing = [key for key in FUNCTIONS if key not in manifest.functions]
    if missing:
        raise ConfigError(f"manifest lacks {missing}", source=str(directory), field="functions")
    regressors = {key: read_regressor(directory, key, entry)
                  for key, entry in manifest.functions.items()}
    return LearnedDevice(manifest.device_type, regressors,
                         {key: entry.features for key, entry in manifest.functions.items()},
                         tuple(manifest.mape), manifest.trained_at, manifest.versions)


def get_max_batch_size(model: PerfModel, state: Array, b_min: int, b_max: int,
                       mem_limit_percent: float = 95.0) -> NDArray[np.int64]:
    """GetMaxBatchSize (Deep-Edge Alg. 1, line 6): the largest batch whose predicted memory
    utilisation, by EstState^mem, stays within ``mem_limit_percent``; 0 if none does.

    The candidates are ``b_max, b_max // 2, b_max // 4, ...`` while at least ``b_min``
    (powers of two when ``b_max`` is one), then ``b_min`` itself, tried from the largest.
    With memory increasing in the batch size this is the paper's halving search, and 0
    means the device cannot take the job even at ``b_min``.

    Parameters
    ----------
    model : PerfModel
        Performance model of the device type; only ``new_state`` is called.
    state : ndarray, shape (n, 3)
        Node states (cpu, gpu, mem) in percent before training.
    b_min, b_max : int
        Smallest and largest batch size allowed, ``1 <= b_min <= b_max``.
    mem_limit_percent : float
        Largest acceptable memory utilisation while training.

    Returns
    -------
    ndarray of int64, shape (n,)
        The batch size per row, 0 where even ``b_min`` does not fit.

    Raises
    ------
    ConfigError
        If ``b_min < 1`` or ``b_max < b_min``.

    Notes
    -----
    One vectorised ``new_state`` call per candidate over the rows still undecided:
    O(n log(b_max / b_min)) predictions.
    """
    if b_min < 1 or b_max < b_min:
        raise ConfigError(f"need 1 <= b_min <= b_max, got {b_min}, {b_max}", field="b_min")
    states = np.asarray(state, dtype=np.float64).reshape(-1, 3)
    best = np.zeros(len(states), dtype=np.int64)
    undecided = np.ones(len(states), dtype=bool)
    for b in _batch_candidates(b_min, b_max):
        rows = np.flatnonzero(undecided)
        if rows.size == 0:
            break
        mem = model.new_state(states[rows], np.full(rows.size, float(b)))[:, 2]
        fits = rows[mem <= mem_limit_percent]
        best[fits], undecided[fits] = b, False
    return best


def _batch_candidates(b_min: int, b_max: int) -> list[int]:
    out = [b_max]
    while out[-1] // 2 >= b_min:
        out.append(out[-1] // 2)
    return out if out[-1] == b_min else [*out, b_min]


def _schema_features(key: str) -> tuple[str, ...] | None:
    if key in FUNCTIONS:
        return FUNCTIONS[key][1]
    return EXEC_FEATURES if key.startswith("EstExecTime[") and key.endswith("]") else None


def _check_profile(profile: pd.DataFrame, device_type: str) -> None:
    missing = [c for c in COLUMNS if c not in profile.columns]
    if missing:
        raise ConfigError(f"profile lacks columns {missing}", source="profile",
                          field=", ".join(missing))
    others = sorted(set(profile["device_type"].astype(str)) - {device_type})
    if others:
        raise ConfigError(f"profile has rows of {others}; models are fitted for one device "
                          f"type ({device_type}) only", source="profile", field="device_type")


def _function_frames(profile: pd.DataFrame) -> Iterator[tuple[str, str, tuple[str, ...],
                                                             pd.DataFrame]]:
    for key, (target, feats) in FUNCTIONS.items():
        yield key, target, feats, _checked_frame(profile, key, target, feats)
    apps = profile["app_kind"].fillna("").astype(str)
    for app in sorted(set(apps) - {""}):
        if not app.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(f"app kind {app!r} is not a plain name", field="app_kind")
        frame = profile.loc[apps == app]
        yield exec_key(app), EXEC_TARGET, EXEC_FEATURES, _checked_frame(
            frame, exec_key(app), EXEC_TARGET, EXEC_FEATURES)


def _checked_frame(frame: pd.DataFrame, key: str, target: str,
                   feats: tuple[str, ...]) -> pd.DataFrame:
    if len(frame) < MIN_ROWS:
        raise ConfigError(f"{len(frame)} rows; {key} needs at least {MIN_ROWS}",
                          source="profile", field=target)
    out = frame.loc[:, [*feats, target]].reset_index(drop=True)
    for col in out.columns:
        values = pd.to_numeric(out[col], errors="coerce").to_numpy(np.float64)
        if not np.isfinite(values).all():
            raise ConfigError(f"non-finite or non-numeric values ({key})", source="profile",
                              field=col)
        out[col] = values
    return out


def _check_settings(time_budget_s: float | None, max_trials: int | None,
                    test_fraction: float) -> None:
    if time_budget_s is None and max_trials is None:
        raise ConfigError("an unlimited search needs max_trials", field="max_trials")
    if time_budget_s is not None and not time_budget_s > 0:
        raise ConfigError(f"must be > 0, got {time_budget_s}", field="time_budget_s")
    if max_trials is not None and max_trials < 1:
        raise ConfigError(f"must be >= 1, got {max_trials}", field="max_trials")
    if not 0.0 < test_fraction < 0.5:
        raise ConfigError(f"must be in (0, 0.5), got {test_fraction}", field="test_fraction")


def _fit_one(key: str, frame: pd.DataFrame, target: str, feats: tuple[str, ...],
             budget: tuple[float, int | None], seed: int,
             test_fraction: float) -> tuple[Regressor, MapeRow]:
    is_test = held_out(len(frame), test_fraction, seed)
    x, y = frame.loc[:, list(feats)], frame[target].to_numpy(np.float64)
    cols = {c: x[c].to_numpy(np.float64) for c in feats}
    z = to_target(key, cols, y)
    z_train = z[~is_test]
    if np.ptp(z_train) == 0:
        regressor: Regressor = ConstantRegressor(float(z_train[0]))
        note = f"constant target ({z_train[0]:g}): constant predictor, no AutoML"
    else:
        regressor, note = _automl(x.loc[~is_test], z_train, budget, seed, key), ""
    test_cols = {c: v[is_test] for c, v in cols.items()}
    predicted = from_target(key, test_cols, regressor.predict(x.loc[is_test]))
    mean, std = _ape_stats(y[is_test], predicted)
    return regressor, {"device": "", "function": key, "estimator": regressor.estimator,
                       "train": int((~is_test).sum()), "test": int(is_test.sum()),
                       "mape_mean": mean, "mape_std": std, "note": note}


def _mape_of_log(x_val: pd.DataFrame, z_val: Array, estimator: Any, *_: Any,
                 **__: Any) -> tuple[float, dict[str, float]]:
    """FLAML custom metric for a log-time target: the MAPE of exp(prediction) against
    exp(target), i.e. the Table I figure the fit is reported by."""
    predicted, actual = np.exp(estimator.predict(x_val)), np.exp(np.asarray(z_val))
    mape = float(np.mean(np.abs(predicted - actual) / actual))
    return mape, {"mape": mape}


# Time functions (log targets) train with an absolute-error loss: |log ŷ − log y| is the
# relative error to first order, so the boosters fit the conditional median, which is what
# minimises MAPE; rf and extra_tree keep squared error (FLAML fixes their criterion).
_ABSOLUTE_LOSS = {"lgbm": {"objective": {"domain": "regression_l1"}},
                  "xgboost": {"objective": {"domain": "reg:absoluteerror"}}}


def _search_settings(key: str) -> dict[str, Any]:
    """FLAML's selection metric and search space per function: state changes by MAE; times
    (log targets) by the held-out MAPE we report, with absolute-error boosters."""
    if key.startswith("EstState^"):
        return {"metric": "mae"}
    return {"metric": _mape_of_log, "custom_hp": _ABSOLUTE_LOSS}


def _automl(x: pd.DataFrame, y: Array, budget: tuple[float, int | None],
            seed: int, key: str) -> Regressor:
    seconds, trials = budget
    automl = AutoML(  # type: ignore[no-untyped-call]
        task="regression", estimator_list=list(ESTIMATORS), time_budget=seconds, seed=seed,
        verbose=0, n_jobs=1, **_search_settings(key),
        **({} if trials is None else {"max_iter": trials}))
    automl.fit(x, y)
    regressor = from_estimator(str(automl.best_estimator), automl.model.estimator)
    # The saved form must predict what FLAML predicts, or Table I would describe another model.
    if not np.allclose(regressor.predict(x), automl.predict(x), rtol=1e-5, atol=1e-12):
        raise RuntimeError(f"converted {automl.best_estimator} disagrees with FLAML's model")
    return regressor


def held_out(n: int, test_fraction: float, seed: int) -> NDArray[np.bool_]:
    """The rows :func:`fit_models` holds out of a function's ``n`` rows (True = test)."""
    n_test = min(n - 1, max(1, round(test_fraction * n)))
    is_test = np.zeros(n, dtype=bool)
    is_test[np.random.default_rng(seed).permutation(n)[:n_test]] = True
    return is_test


def _ape_stats(y: Array, pred: Array) -> tuple[float | None, float | None]:
    """Mean and std of the absolute percentage errors over non-zero targets (a zero target
    has no percentage error)."""
    nonzero = y != 0
    if not nonzero.any():
        return None, None
    ape = 100.0 * np.abs(pred[nonzero] - y[nonzero]) / np.abs(y[nonzero])
    return float(ape.mean()), float(ape.std())


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for lib in _LIBRARIES:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            out[lib] = "absent"
    return out


def _state_cols(state: Array) -> dict[str, Array]:
    s = np.asarray(state, dtype=np.float64).reshape(-1, 3)
    return {name: s[:, i] for i, name in enumerate(STATE_COLUMNS)}


def _rows(values: Array | float, n: int) -> Array:
    return np.broadcast_to(np.asarray(values, dtype=np.float64), (n,))
