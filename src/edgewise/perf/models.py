"""Learned performance and interference models of one device type (Deep-Edge §IV-C1, §V-B),
and GetMaxBatchSize (§IV-C2) on any performance model.

The public face of ``perf.learned`` (the model and its accuracy table), ``perf.fitting``
(AutoML) and ``perf.model_io`` (save and load): ``fit_models``, ``save``, ``load``,
``mape_table``, ``mape_markdown``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.perf.learned import (
    FUNCTIONS,
    FitMemo,
    LearnedDevice,
    MapeRow,
    exec_key,
    held_out,
    mape_markdown,
    mape_table,
)
from edgewise.perf.model_io import load, save
from edgewise.perf.schema import PerfModel

if TYPE_CHECKING:
    from edgewise.perf.fitting import ESTIMATORS, MIN_ROWS, fit_models

_FITTING = ("ESTIMATORS", "MIN_ROWS", "fit_models")
"""Names of ``perf.fitting``, imported on first use: fitting loads FLAML, which loads Ray,
and planning with a model (a pure policy calling :func:`get_max_batch_size`) needs neither."""


def __getattr__(name: str) -> Any:
    if name in _FITTING:
        return getattr(importlib.import_module("edgewise.perf.fitting"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ESTIMATORS", "FUNCTIONS", "MIN_ROWS", "FitMemo", "LearnedDevice", "MapeRow", "exec_key",
    "fit_models", "get_max_batch_size", "held_out", "load", "mape_markdown", "mape_table", "save",
]  # fmt: skip

Array = NDArray[np.float64]


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

