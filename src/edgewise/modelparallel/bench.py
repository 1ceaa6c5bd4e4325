"""`edgewise bench srole`: SROLE's emulation protocol (§V-A, Figs. 4–8) on the simulator.

1. Offline pre-training of each method (one shared Q-table, exploring, on fresh random
   networks of §V-A's "RL Training" ranges, the three models, 100 % workload, κ = 100),
   copied to every node.
2. JCT vs number of edges (5–25) for VGG-16, GoogLeNet and the RNN: per (edges, model) one
   Table I network; every method plays the same sequence of rounds (3 jobs per cluster,
   PageRank background at 100 %), taking its greedy action (§IV-B: "each edge takes the
   optimal action ... based on its observed state") and learning online ("keeps training
   the RL model"); a round's JCT is the mean over its jobs, the case's the median over
   rounds (§V-A: "We repeated each experiment 5 times and plotted the median").
3. Tasks per device and resource utilisation at 25 edges for workloads 60–100 %.
4. Decision and shielding overhead at 25 edges, as work (deterministic look-ups and checks
   on the critical path; parallel deciders and sub-shields count once) and wall seconds
   (the headline ratio: fastest-of-15 timings on identical random joint actions).
5. Action collisions vs κ: SROLE-C/D pre-trained and run with each κ; MARL and RL do not
   use κ. Collisions: overloaded nodes hosting layers of ≥ 2 agents, in the executed joint
   action (``collisions_*``) and in the agents' proposal (``proposed_collisions_*``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.shield_timing import shield_seconds
from edgewise.modelparallel.sim import KAPPA, RoundResult, play_round, pretrain, random_round

__all__ = ["METHOD_NAMES", "Protocol", "run_srole_bench"]

METHOD_NAMES = ("rl", "marl", "srole-c", "srole-d")
Progress = Callable[[str, float], None]
Figure = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Protocol:
    """Sizes of the protocol: edge counts, workloads (%), κ values, pre-training rounds,
    online rounds per case and ``partitions`` (None: one task per model level, §III; N: the
    levels grouped into at most N partitions, `jobs.cluster_jobs`)."""

    edges: tuple[int, ...]
    workloads: tuple[float, ...]
    kappas: tuple[float, ...]
    pretrain: int
    rounds: int
    partitions: int | None = None


def _protocol(quick: bool) -> Protocol:
    if quick:
        return Protocol((5, 25), (100.0,), (50.0, 100.0), pretrain=300, rounds=20)
    return Protocol((5, 10, 15, 20, 25), (60.0, 80.0, 100.0), (25.0, 50.0, 100.0, 200.0),
                    pretrain=1500, rounds=60)


def _online(name: str, base: QAgent, n_edges: int, model: str, workload: float, rounds: int,
            seed: int, kappa: float = KAPPA, partitions: int | None = None
            ) -> list[RoundResult]:
    """One method on one network: the same rounds for every method (seeded by the case);
    greedy actions with online learning (§IV-B)."""
    case = [seed, n_edges, int(workload), srole_models().index(model)]
    net = random_network(n_edges, np.random.default_rng([*case, 0]))
    gen = np.random.default_rng([*case, 1])
    rnds = [random_round(net, model, workload, gen, partitions) for _ in range(rounds)]
    agents = [base.copy() for _ in range(net.n)]
    act = np.random.default_rng([*case, 2])
    method = get_method(name)
    return [play_round(method, r, agents, act, explore=False, kappa=kappa) for r in rnds]


def _reduction(ours: float, theirs: float) -> float:
    return 1.0 - ours / theirs if theirs > 0 else 0.0


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def _jct_figure(bases: dict[str, QAgent], p: Protocol, seed: int,
                tick: Callable[[str], None]) -> tuple[Figure, dict[str, list[RoundResult]]]:
    jct: Figure = {m: {n: [] for n in METHOD_NAMES} for m in srole_models()}
    at25: dict[str, list[RoundResult]] = {n: [] for n in METHOD_NAMES}
    for model in srole_models():
        for n_edges in p.edges:
            tick(f"JCT: {model}, {n_edges} edges")
            for name in METHOD_NAMES:
                res = _online(name, bases[name], n_edges, model, 100.0, p.rounds, seed,
                              partitions=p.partitions)
                jct[model][name].append(float(np.median([np.mean(r.jct_s) for r in res])))
                if n_edges == max(p.edges):
                    at25[name] += res
    return jct, at25


def _load_figure(bases: dict[str, QAgent], p: Protocol, seed: int,
                 tick: Callable[[str], None]) -> Figure:
    """Median and range of tasks per device and of CPU/memory utilisation (Figs. 5–6)."""
    out: Figure = {}
    top = max(p.edges)
    for model in srole_models():
        out[model] = {}
        for w in p.workloads:
            tick(f"load: {model}, {w:.0f} %")
            for name in METHOD_NAMES:
                res = _online(name, bases[name], top, model, w, p.rounds // 2, seed,
                              partitions=p.partitions)
                tasks = [t for r in res for t in r.tasks if t > 0]
                u = np.concatenate([r.utilisation for r in res])
                out[model].setdefault(name, {})[f"{w:.0f}"] = {
                    "tasks_median": float(np.median(tasks)), "tasks_min": int(min(tasks)),
                    "tasks_max": int(max(tasks)),
                    "cpu_util_median": float(np.median(u[:, 0])),
                    "mem_util_median": float(np.median(u[:, 1])),
                    "cpu_util_p95": float(np.percentile(u[:, 0], 95))}
    return out


def _kappa_figure(bases: dict[str, QAgent], p: Protocol, seed: int,
                  tick: Callable[[str], None]) -> Figure:
    """Collisions per round vs κ at the largest network, mean over the three models."""
    top = max(p.edges)
    out: Figure = {}
    for kappa in p.kappas:
        tick(f"collisions: κ = {kappa:.0f}")
        row: Figure = {}
        for name in METHOD_NAMES:
            base = bases[name]
            if name.startswith("srole") and kappa != KAPPA:
                base = pretrain(get_method(name), srole_models(), np.random.default_rng(
                    [seed, int(kappa), 3]), rounds=p.pretrain, kappa=kappa,
                    n_partitions=p.partitions)
            res = [r for m in srole_models()
                   for r in _online(name, base, top, m, 100.0, p.rounds, seed, kappa,
                                    p.partitions)]
            row[name] = {"collisions": _mean([r.collisions_after for r in res]),
                         "proposed_collisions": _mean([r.collisions for r in res]),
                         "unsafe_proposed": _mean([r.unsafe for r in res]),
                         "overloaded_after": _mean([r.overloaded_after for r in res])}
        out[f"{kappa:.0f}"] = row
    return out


def _overhead(at25: dict[str, list[RoundResult]]) -> Figure:
    return {n: {"decision_ops": _mean([r.decision_ops for r in rs]),
                "shield_ops": _mean([r.shield_ops for r in rs]),
                "decision_wall_s": _mean([r.decision_s for r in rs]),
                "shield_wall_s": _mean([r.shield_s for r in rs])} for n, rs in at25.items()}


def _headline(jct: Figure, kappa_fig: Figure, overhead: Figure) -> Figure:
    def red(a: str, b: str) -> list[float]:
        return [_reduction(x, y) for m in jct for x, y in zip(jct[m][a], jct[m][b],
                                                              strict=True)]

    col = kappa_fig[f"{KAPPA:.0f}"]
    out = {"jct_reduction_srole_c_vs_marl": _mean(red("srole-c", "marl")),
           "jct_reduction_srole_d_vs_marl": _mean(red("srole-d", "marl")),
           "jct_reduction_srole_c_vs_rl": _mean(red("srole-c", "rl")),
           "jct_reduction_srole_d_vs_rl": _mean(red("srole-d", "rl")),
           "jct_reduction_srole_c_vs_marl_range": [min(red("srole-c", "marl")),
                                                   max(red("srole-c", "marl"))],
           "shield_ops_ratio_d_to_c": (overhead["srole-d"]["shield_ops"]
                                       / max(overhead["srole-c"]["shield_ops"], 1e-12)),
           "shield_wall_ratio_d_to_c": (overhead["srole-d"]["shield_wall_s"]
                                        / max(overhead["srole-c"]["shield_wall_s"], 1e-12))}
    for s in ("c", "d"):
        for key, field in (("collision_reduction", "collisions"),
                           ("proposed_collision_reduction", "proposed_collisions")):
            out[f"{key}_srole_{s}"] = _reduction(col[f"srole-{s}"][field], col["marl"][field])
            out[f"{key}_srole_{s}_vs_rl"] = _reduction(col[f"srole-{s}"][field],
                                                       col["rl"][field])
    return out


def run_srole_bench(seed: int = 0, quick: bool = False, include_real: bool = True,
                    progress: Progress | None = None, plots_dir: Path | None = None,
                    protocol: Protocol | None = None, partitions: int | None = None
                    ) -> dict[str, object]:
    """Run the protocol of the module docstring; returns the figures and the headline keys
    (``jct_reduction_*``, ``collision_reduction_*``; ``shield_seconds_ratio_d_to_c``: the
    shields' critical-path wall seconds on identical joint actions, fastest of 15 repeats,
    SROLE-D over SROLE-C (`shield_timing`); ``shield_ops_ratio_d_to_c``: the same in
    deterministic elementary checks) and, when ``include_real``, the real
    model-parallel measurements of `edgewise.modelparallel.realbench.real_figures`.
    ``protocol`` overrides the sizes (tests); ``partitions`` groups each job's levels into
    at most that many tasks (default: one task per level). Keys ending in
    ``wall_s``/``wall_ratio_d_to_c``,
    ``shield_seconds_ratio_d_to_c``, ``overhead.shield_fastest_s`` and ``bench_seconds``
    are measured wall-clock; every other number is the same for the
    same seed."""
    p = protocol or _protocol(quick)
    if partitions is not None:  # composes with a given protocol instead of being ignored
        p = replace(p, partitions=partitions)
    steps = 5 + len(srole_models()) * (len(p.edges) + len(p.workloads)) + len(p.kappas)
    done = [0]
    t0 = time.perf_counter()

    share = 0.8 if include_real else 1.0  # of the progress bar, the rest for real runs

    def tick(msg: str) -> None:
        if progress is not None:
            progress(msg, share * done[0] / steps)
        done[0] += 1

    bases = {}
    for name in METHOD_NAMES:
        tick(f"pre-training {name}")
        bases[name] = pretrain(get_method(name), srole_models(), np.random.default_rng(
            [seed, 100]), rounds=p.pretrain, n_partitions=p.partitions)
    jct, at25 = _jct_figure(bases, p, seed, tick)
    load = _load_figure(bases, p, seed, tick)
    kappa_fig = _kappa_figure(bases, p, seed, tick)
    overhead = _overhead(at25)
    tick("shield timing")
    timed = shield_seconds(srole_models(), max(p.edges), min(p.rounds, 10), seed,
                           n_partitions=p.partitions)
    overhead["shield_fastest_s"] = timed
    result: dict[str, object] = {**_headline(jct, kappa_fig, overhead),
                                 "shield_seconds_ratio_d_to_c": timed["srole-d"] / timed["srole-c"],
                                 "protocol": {**asdict(p), "seed": seed, "quick": quick},
                                 "jct_s": {"edges": list(p.edges), **jct},
                                 "load": load, "overhead": overhead,
                                 "collisions_vs_kappa": kappa_fig}
    if plots_dir is not None:
        from edgewise.modelparallel.plots import save_plots
        result["plots"] = [str(x) for x in save_plots(result, plots_dir)]
    if include_real:
        from edgewise.modelparallel.realbench import real_figures
        say = progress
        result.update(real_figures(seed, quick, None if say is None else
                                   lambda m, f: say(m, share + (1 - share) * f)))
    result["bench_seconds"] = time.perf_counter() - t0
    if progress is not None:
        progress("done", 1.0)
    return result
