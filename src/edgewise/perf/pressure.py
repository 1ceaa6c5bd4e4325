"""Held-out error of the pressure estimate as Algorithm 1 evaluates it (Deep-Edge Eq. 7–8)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from edgewise.perf.learned import held_out
from edgewise.perf.schema import STATE_COLUMNS, PerfModel

__all__ = ["pressure_mape"]


def pressure_mape(model: PerfModel, profile: pd.DataFrame, app_kind: str, *,
                  mem_limit_percent: float, seed: int = 0,
                  test_fraction: float = 0.16) -> float | None:
    """MAPE (%) of the pressure on ``app_kind`` as Algorithm 1 (line 14) evaluates it:
    pressure = EstExecTime(EstState(X_i, b_i)), Eq. 8 applied to Eq. 7's prediction, against
    the app time measured in the profile.

    Table I's EstExecTime row feeds the *measured* new state to the model; the planner feeds
    EstState's prediction, and only for batches GetMaxBatchSize admits. So the rows scored
    here are those held out from both fits (``fit_models``' split for the same ``seed`` and
    ``test_fraction``) whose predicted memory is within ``mem_limit_percent``.

    Parameters
    ----------
    model : the learned (or any) performance model of the profile's device type.
    profile : the profile the model was fitted on (``schema.COLUMNS``), in the same order.
    app_kind : the background app, e.g. "sift".
    mem_limit_percent : GetMaxBatchSize's memory limit (``UpdateProblem.mem_limit_percent``).
    seed, test_fraction : those given to ``fit_models``.

    Returns
    -------
    float or None
        The MAPE in percent; None if no held-out row of the app lies within the limit.
    """
    apps = profile["app_kind"].fillna("").astype(str).to_numpy() == app_kind
    if not apps.any():
        return None
    exec_test = np.zeros(len(profile), dtype=bool)
    exec_test[np.flatnonzero(apps)] = held_out(int(apps.sum()), test_fraction, seed)
    rows = profile.loc[held_out(len(profile), test_fraction, seed) & exec_test]
    initial = rows.loc[:, list(STATE_COLUMNS)].to_numpy(np.float64)
    new = model.new_state(initial, rows["batch_size"].to_numpy(np.float64))
    inside = new[:, 2] <= mem_limit_percent
    if not inside.any():
        return None
    predicted = model.exec_time(app_kind, new[inside])
    measured = rows["app_exec_ms"].to_numpy(np.float64)[inside]
    return float(100.0 * np.mean(np.abs(predicted - measured) / measured))
