"""SEIFER §6.1's sweep: every policy on random geometric clusters, and its summary figures.

For each node count and trial, a zoo model (cycled), a random geometric cluster (§6.1,
Eq. 13; node memory drawn from 64, 128, 256, 512 MB as the paper's capacities) and a number
of bandwidth classes drawn from 2..20; every policy plans and :func:`~edgewise.pipeline.
sim.simulate` scores its plan (Eq. 3). Approximation ratios are to ``exact`` where it is
tractable (up to ``exact_nodes`` nodes) and to the Theorem 1 lower bound elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.nn.chain import ModelChain
from edgewise.pipeline.generate import random_instance
from edgewise.pipeline.policies.exact import theorem1_lower_bound
from edgewise.pipeline.policies.seifer import seifer
from edgewise.pipeline.problem import PipelineProblem
from edgewise.pipeline.sim import simulate

__all__ = ["JSON_NAMES", "MEMORY_MB", "NODE_COUNTS", "POLICIES", "summary", "sweep"]

NODE_COUNTS = (5, 10, 15, 20, 50)
MEMORY_MB = (64, 128, 256, 512)
POLICIES = ("random", "joint-greedy", "seifer", "bottleneck-search")
JSON_NAMES = {"bottleneck-search": "bottleneck-dp"}
"""Policies under the name the issue-5 JSON gave them (``bottleneck-search`` was called
``bottleneck-dp``; its keys are kept so that earlier contracts still read them)."""
Tick = Callable[[str], None]
Row = dict[str, Any]


def _instance(n: int, model: ModelChain, rng: np.random.Generator,
              dispatcher_transfer: bool) -> PipelineProblem:
    """A §6.1 cluster whose node capacity (64, 128, 256 or 512 MB) is too small for the whole
    model, as the paper's colour maps (Fig. 15: "only generated for the node capacities which
    were too small for the models to fit on a single device")."""
    total_mb = sum(model.memory_bytes) / 2**20
    small = [m for m in MEMORY_MB if m < total_mb] or [min(MEMORY_MB)]
    memory = float(rng.choice(small))
    problem = random_instance(n, model, rng, memory_mb=(memory, memory))
    return dataclasses.replace(problem, dispatcher_transfer=dispatcher_transfer)


def _theorem1(problem: PipelineProblem, cuts: tuple[int, ...]) -> float:
    """Theorem 1's bound for placements of the partitioning ``cuts`` (η(p_0) first when the
    dispatcher's transfer is scored)."""
    chain = problem.chain
    sizes = [chain.input_bytes] if problem.dispatcher_transfer else []
    sizes += [chain.output_bytes[c - 1] for c in cuts[1:-1]]
    return theorem1_lower_bound(problem, sizes)


def _plan(name: str, problem: PipelineProblem, rng: np.random.Generator,
          classes: int) -> tuple[float, float, tuple[int, ...]]:
    """(bottleneck s, decision s, cuts) of one policy; (inf, nan, ()) when it finds no plan."""
    policy = functools.partial(seifer, n_classes=classes) if name == "seifer" else name
    try:
        outcome = simulate(problem, policy, seed=rng)
    except InfeasibleError:
        return float("inf"), float("nan"), ()
    return outcome.bottleneck_s, outcome.timings["decision_seconds"], outcome.plan.cuts


def _trial(n: int, model: ModelChain, rng: np.random.Generator, exact_nodes: int,
           dispatcher_transfer: bool) -> Row | None:
    problem = _instance(n, model, rng, dispatcher_transfer)
    classes = int(rng.integers(2, 21))
    results = {p: _plan(p, problem, rng, classes) for p in POLICIES}
    if not np.isfinite(results["bottleneck-search"][0]):
        return None  # the model does not fit this cluster at all
    if n <= exact_nodes:
        best, exact_ok = simulate(problem, "exact", seed=rng).bottleneck_s, True
    else:
        best, exact_ok = _theorem1(problem, results["seifer"][2] or (0, model.n_segments)), False
    return {"n": n, "model": model.name, "classes": classes, "best": best,
            "exact": exact_ok, **{p: r[0] for p, r in results.items()},
            **{f"{p}_seconds": r[1] for p, r in results.items()}}


def sweep(*, trials: int, node_counts: tuple[int, ...], seed: int, exact_nodes: int,
          chains: list[ModelChain], dispatcher_transfer: bool = False,
          tick: Tick = lambda message: None) -> list[Row]:
    """The §6.1 sweep; one row per feasible trial (``tick`` once per trial). Trial ``t`` at
    ``n`` nodes draws from its own generator (``seed``, ``n``, ``t``), so both scorings see
    the same clusters."""
    rows: list[Row] = []
    for i, n in enumerate(node_counts):
        for t in range(trials):
            tick(f"{n} nodes, trial {t + 1}/{trials}")
            rng = np.random.default_rng([seed, n, t])
            row = _trial(n, chains[(i * trials + t) % len(chains)], rng, exact_nodes,
                         dispatcher_transfer)
            if row is not None:
                rows.append(row)
    return rows


def _ratio(rows: list[Row], policy: str, *, exact_only: bool) -> float:
    vals = [r[policy] / r["best"] for r in rows
            if (r["exact"] or not exact_only) and np.isfinite(r[policy]) and r["best"] > 0]
    return round(statistics.mean(vals), 4) if vals else float("nan")


def _mean_ratio(rows: list[Row], num: str, den: str) -> float:
    vals = [r[num] / r[den] for r in rows
            if np.isfinite(r[num]) and np.isfinite(r[den]) and r[den] > 0]
    return round(statistics.mean(vals), 4) if vals else float("nan")


def _slowest(rows: list[Row], policy: str, n: int) -> float:
    """The longest decision of ``policy`` at ``n`` nodes (wall-clock seconds)."""
    return round(max((r[f"{policy}_seconds"] for r in rows if r["n"] == n), default=0.0), 4)


def summary(rows: list[Row]) -> tuple[dict[str, Any], dict[str, float]]:
    """The sweep's figures (deterministic for a seed) and its decision times (wall-clock)."""
    finite = [r for r in rows if np.isfinite(r["seifer"])]
    by_n: dict[int, list[Row]] = defaultdict(list)
    for r in finite:
        by_n[r["n"]].append(r)
    exact_rows = [r for r in finite if r["exact"]]
    search = "bottleneck-search"
    figures = {
        "trials": len(rows),
        "seifer_infeasible_trials": len(rows) - len(finite),
        "speedup_vs_random_mean": _mean_ratio(finite, "random", "seifer"),
        "speedup_vs_random_by_model": {m: _mean_ratio(
            [r for r in finite if r["model"] == m], "random", "seifer")
            for m in sorted({r["model"] for r in finite})},
        "speedup_vs_joint_by_nodes": {str(n): round(statistics.mean(
            r["joint-greedy"] / r["seifer"] for r in rs), 4) for n, rs in sorted(by_n.items())},
        "approx_ratio_mean": _ratio(finite, "seifer", exact_only=True),
        "joint_greedy_approx_ratio_mean": _ratio(finite, "joint-greedy", exact_only=True),
        "bottleneck_dp_approx_ratio_mean": _ratio(rows, search, exact_only=True),
        "approx_ratio_to_theorem1_by_nodes": {
            str(n): {JSON_NAMES.get(p, p): _ratio(rs, p, exact_only=False) for p in POLICIES[1:]}
            for n, rs in sorted(by_n.items()) if not rs[0]["exact"]},
        "bottleneck_dp_ties_or_beats": {str(n): all(
            r[search] <= min(r["seifer"], r["joint-greedy"]) * (1 + 1e-9) for r in rs)
            for n, rs in sorted(by_n.items())},
        "optimal_share": round(sum(r["seifer"] <= r["best"] * (1 + 1e-9)
                                   for r in exact_rows) / max(len(exact_rows), 1), 4),
    }
    timings = {"decision_seconds_50_nodes": _slowest(finite, "seifer", 50),
               "decision_seconds_50_nodes_bottleneck_dp": _slowest(rows, search, 50)}
    return figures, timings
