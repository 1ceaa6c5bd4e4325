"""`edgewise bench srole --sweep`: where SROLE's JCT headline holds, over what the paper leaves
open — the background's intensity and what an overloaded node does (`jct.slowdown`).

Each cell of the grid (overload model × background intensity) is the bench's JCT figure at
25 edges (the paper's default size) with the quick protocol's sizes (`sweep_protocol`),
every method pre-trained and run under that cell's conditions; every other setting keeps
its default (docs/srole.md, "Defaults"), so the default cell is the quick bench's JCT
figure at 25 edges. The cell's figures are the JCT reductions of SROLE-C and SROLE-D
against MARL (CQ-learning), RL and IQL, and per method the runs that failed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edgewise.bench import BenchContext, Figures
from edgewise.modelparallel.benchfigs import (
    METHOD_NAMES,
    Protocol,
    Tally,
    jct_figure,
    reduction,
)
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.problem import OVERLOAD_MODELS
from edgewise.modelparallel.rounds import Conditions
from edgewise.modelparallel.training import pretrain

__all__ = ["INTENSITIES", "PAIRS", "sweep_figures", "sweep_protocol"]

INTENSITIES = (0.5, 1.0, 2.0, 4.0)
"""Background intensities swept (× each PageRank worker's default CPU and bandwidth)."""
QUICK_INTENSITIES = (1.0, 4.0)
PAIRS = (("srole-c", "marl"), ("srole-d", "marl"), ("srole-c", "rl"), ("srole-d", "rl"),
         ("srole-c", "iql"))


def sweep_protocol(quick: bool) -> Protocol:
    """The sizes of each cell: 25 edges, 100 % workload, κ = 100; the quick bench's
    pre-training and online rounds (fewer with ``quick``)."""
    if quick:
        return Protocol((25,), (100.0,), (100.0,), pretrain=100, rounds=8)
    return Protocol((25,), (100.0,), (100.0,), pretrain=300, rounds=20)


def _key(ours: str, theirs: str) -> str:
    return f"jct_reduction_{ours.replace('-', '_')}_vs_{theirs}"


def _cell(ctx: BenchContext, p: Protocol, conditions: Conditions, tally: Tally,
          top: int) -> dict[str, Any]:
    """Pre-train every method under ``conditions``, then the JCT figure at ``top`` edges."""
    bases = {name: pretrain(get_method(name), srole_models(),
                            np.random.default_rng([ctx.seed, 100]), rounds=p.pretrain,
                            n_partitions=p.partitions, conditions=conditions)
             for name in METHOD_NAMES}
    jct, _ = jct_figure(bases, p, ctx.seed, lambda _m: None, tally, conditions, (top,))
    cell: dict[str, Any] = {"overload": conditions.overload,
                            "intensity": conditions.intensity}
    for ours, theirs in PAIRS:
        cell[_key(ours, theirs)] = float(np.mean([reduction(jct[m][ours][0], jct[m][theirs][0])
                                                  for m in jct]))
    cell["jct_s"] = {m: {n: jct[m][n][0] for n in METHOD_NAMES} for m in jct}
    return cell


def sweep_figures(ctx: BenchContext, p: Protocol) -> Figures:
    """The grid (module docstring) as ``{"sweep": ...}``: the axes, every cell, and per
    reduction a matrix (rows: overload models, columns: intensities)."""
    intensities = QUICK_INTENSITIES if ctx.quick else INTENSITIES
    top = max(p.edges)
    cells, tally = [], Tally()
    total = len(OVERLOAD_MODELS) * len(intensities)
    for k, (overload, x) in enumerate((o, x) for o in OVERLOAD_MODELS for x in intensities):
        ctx.progress(f"sweep: {overload}, background × {x:g}", k / total)
        cells.append(_cell(ctx, p, Conditions(overload=overload, intensity=x), tally, top))
        counts = {n: dict(tally.counts[n]) for n in METHOD_NAMES}
        cells[-1]["runs"] = counts
        tally = Tally()
    grid = {_key(a, b): [[c[_key(a, b)] for c in cells if c["overload"] == o]
                         for o in OVERLOAD_MODELS] for a, b in PAIRS}
    default = Conditions()
    return {"sweep": {"overload_models": list(OVERLOAD_MODELS), "intensities": list(intensities),
                      "edges": top, "rounds": p.rounds, "pretrain": p.pretrain,
                      "defaults": {"overload": default.overload,
                                   "intensity": default.intensity, "drift": default.drift},
                      "grid": grid, "cells": cells}}
