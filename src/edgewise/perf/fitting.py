"""Fitting a device's learned functions by AutoML (FLAML), as Deep-Edge does with H2O
(§IV-C1, §V-B): checked profiles, a seeded held-out split, one search per function
minimising the error Table I reports."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
import pandas as pd
from flaml.automl import AutoML
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.perf.learned import (
    EXEC_TARGET,
    FUNCTIONS,
    FitMemo,
    LearnedDevice,
    MapeRow,
    exec_key,
    from_target,
    held_out,
    to_target,
)
from edgewise.perf.regressors import ConstantRegressor, Regressor, from_estimator
from edgewise.perf.schema import COLUMNS, EXEC_FEATURES

__all__ = ["ESTIMATORS", "MIN_ROWS", "fit_models"]

Array = NDArray[np.float64]
ESTIMATORS = ("lgbm", "xgboost", "rf", "extra_tree")
MIN_ROWS = 40  # per learned function: enough for FLAML's cross-validation and a test split
_LIBRARIES = ("flaml", "lightgbm", "xgboost", "scikit-learn", "numpy", "pandas")

def fit_models(profile: pd.DataFrame, device_type: str, *, time_budget_s: float | None = 10.0,
               seed: int = 0, test_fraction: float = 0.16, max_trials: int | None = None,
               memo: FitMemo | None = None) -> LearnedDevice:
    """Fit every learned function of one device type by AutoML (FLAML), as Deep-Edge does
    with H2O: one FLAML run per function over LightGBM, XGBoost, random forest and
    extra-trees, minimising MAPE, with one thread; a constant predictor for a target that is
    constant in training (``new_gpu`` without a GPU); EstExecTime per non-empty ``app_kind``.

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
    memo : FitMemo or None
        Fits reused where a function's data and settings are the same (trial-bounded
        searches only: they are deterministic); new fits are added to it.

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
    another model on a busier machine; a trial-bounded one gives the same models per seed.
    """
    _check_profile(profile, device_type)
    _check_settings(time_budget_s, max_trials, test_fraction)
    settings = (-1.0 if time_budget_s is None else time_budget_s, max_trials)  # -1: no limit
    regressors: dict[str, Regressor] = {}
    features: dict[str, tuple[str, ...]] = {}
    rows: list[MapeRow] = []
    reuse = memo if time_budget_s is None else None  # a timed search is not repeatable
    for key, target, feats, frame in list(_function_frames(profile)):  # check all, then fit
        regressors[key], row = _fit_memoised(reuse, (key, frame, target, feats), settings,
                                             seed, test_fraction)
        features[key] = feats
        rows.append({**row, "device": device_type})
    return LearnedDevice(device_type, regressors, features, tuple(rows),
                         datetime.now(UTC).isoformat(timespec="seconds"), _versions())


def _fit_memoised(memo: FitMemo | None, function: tuple[str, pd.DataFrame, str, tuple[str, ...]],
                  settings: tuple[float, int | None], seed: int,
                  test_fraction: float) -> tuple[Regressor, MapeRow]:
    """``_fit_one``, or the memo's entry for the same function, data and settings."""
    key, frame, target, feats = function
    memo_key = (key, _digest(frame), settings, seed, test_fraction)
    if memo is not None and memo_key in memo:
        return memo[memo_key]
    fitted = _fit_one(key, frame, target, feats, settings, seed, test_fraction)
    if memo is not None:
        memo[memo_key] = fitted
    return fitted


def _digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a function's training frame (its columns and values)."""
    data = pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
    return hashlib.sha256(",".join(frame.columns).encode() + data).hexdigest()


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

