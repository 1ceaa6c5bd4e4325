"""A learned device model (Deep-Edge §IV-C1): the functions EstComputeTime, EstUpdateTime,
EstState and EstExecTime of one device type, the targets they are fitted to, and their
held-out accuracy table (Table I)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import TypedDict

from edgewise.errors import ConfigError
from edgewise.perf.regressors import Regressor
from edgewise.perf.schema import (
    COMPUTE_FEATURES,
    EXEC_FEATURES,
    STATE_COLUMNS,
    STATE_FEATURES,
    UPDATE_FEATURES,
)

__all__ = [
    "EXEC_TARGET", "FUNCTIONS", "FitMemo", "LearnedDevice", "MapeRow", "exec_key",
    "from_target", "held_out", "mape_markdown", "mape_table", "schema_features", "to_target",
]  # fmt: skip

Array = NDArray[np.float64]

# Learned function -> (profile target column, features); EstExecTime is added per app kind.
FUNCTIONS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "EstComputeTime": ("compute_s_per_sample", COMPUTE_FEATURES),
    "EstUpdateTime": ("update_s", UPDATE_FEATURES),
    **{f"EstState^{r}": (f"new_{r}", STATE_FEATURES) for r in STATE_COLUMNS},
}
EXEC_TARGET = "app_exec_ms"
_MIN_TIME = 1e-9  # predicted times are clamped to at least this (seconds or ms)


FitMemo = MutableMapping[tuple[Any, ...], tuple[Regressor, "MapeRow"]]
"""Fitted functions by (function, its training data, search settings): see
``perf.fitting.fit_models``."""


def exec_key(app_kind: str) -> str:
    """Name of the EstExecTime function of one background app, e.g. ``EstExecTime[sift]``."""
    return f"EstExecTime[{app_kind}]"



def schema_features(key: str) -> tuple[str, ...] | None:
    """The features of a learned function in the current schema; None for an unknown one."""
    if key in FUNCTIONS:
        return FUNCTIONS[key][1]
    return EXEC_FEATURES if key.startswith("EstExecTime[") and key.endswith("]") else None



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
        return from_target(key, columns, self.regressors[key].predict(columns))


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


def _state_cols(state: Array) -> dict[str, Array]:
    s = np.asarray(state, dtype=np.float64).reshape(-1, 3)
    return {name: s[:, i] for i, name in enumerate(STATE_COLUMNS)}


def _rows(values: Array | float, n: int) -> Array:
    return np.broadcast_to(np.asarray(values, dtype=np.float64), (n,))


def held_out(n: int, test_fraction: float, seed: int) -> NDArray[np.bool_]:
    """The rows :func:`fit_models` holds out of a function's ``n`` rows (True = test)."""
    n_test = min(n - 1, max(1, round(test_fraction * n)))
    is_test = np.zeros(n, dtype=bool)
    is_test[np.random.default_rng(seed).permutation(n)[:n_test]] = True
    return is_test
