"""The figures of `edgewise bench srole` (SROLE §V-A, Figs. 4–8), each from simulations of the
same cases for every method; see ``bench`` for the protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.rounds import KAPPA, Conditions
from edgewise.modelparallel.sim import SimOutcome, SroleProblem, simulate
from edgewise.modelparallel.training import pretrain

__all__ = ["METHOD_NAMES", "SHIELDED", "Protocol", "Tally", "case", "collision_figure",
           "headline", "jct_figure", "load_figure", "overhead", "protocol", "reduction"]

METHOD_NAMES = ("rl", "marl", "iql", "srole-c", "srole-d")
SHIELDED = ("srole-c", "srole-d")
Figure = dict[str, Any]
Tick = Callable[[str], None]
FAILURES = ("memory", "cpu", "bandwidth")


class Tally:
    """Per method, over every simulated case: runs of invalid schedules by reason, jobs
    deferred by a shield, jobs placed again, and jobs never run."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {n: {} for n in METHOD_NAMES}

    def add(self, name: str, out: SimOutcome) -> SimOutcome:
        row = self.counts[name]
        for key, value in (*((f"invalid_{f}_runs", out.failures(f)) for f in FAILURES),
                           ("deferred_by_shield", out.failures("deferred")),
                           ("re_placed", sum(j.attempts - 1 for j in out.jobs)),
                           ("never_run", out.dropped()), ("jobs", len(out.jobs))):
            row[key] = row.get(key, 0) + value
        return out


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


def protocol(quick: bool) -> Protocol:
    """The full protocol, or the quick one (edges 5 and 25, fewer rounds)."""
    if quick:
        return Protocol((5, 25), (100.0,), (50.0, 100.0), pretrain=300, rounds=20)
    return Protocol((5, 10, 15, 20, 25), (60.0, 80.0, 100.0), (25.0, 50.0, 100.0, 200.0),
                    pretrain=1500, rounds=60)


def case(name: str, base: QAgent, n_edges: int, model: str, workload: float, rounds: int,
         seed: int, kappa: float = KAPPA, partitions: int | None = None,
         conditions: Conditions | None = None) -> SimOutcome:
    """One method on one case: the network from ``[*case, 0]``, the same rounds for every
    method (``[*case, 1]``); greedy actions with online learning (§IV-B)."""
    seeds = [seed, n_edges, int(workload), srole_models().index(model)]
    net = random_network(n_edges, np.random.default_rng([*seeds, 0]))
    problem = SroleProblem(net, model, workload, rounds, partitions, kappa,
                           conditions or Conditions())
    return simulate(problem, name, seed=seeds, agent=base)


def reduction(ours: float, theirs: float) -> float:
    """1 − ours / theirs (0 when theirs is not positive)."""
    return 1.0 - ours / theirs if theirs > 0 else 0.0


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else 0.0


def jct_figure(bases: dict[str, QAgent], p: Protocol, seed: int, tick: Tick,
               tally: Tally | None = None, conditions: Conditions | None = None,
               edges: tuple[int, ...] | None = None
               ) -> tuple[Figure, dict[str, list[SimOutcome]]]:
    """Median over initiating rounds of the mean JCT of the round's jobs (waits for
    re-placement included), per model, method and edge count (Fig. 4); and the outcomes at
    the largest network (for the overhead)."""
    jct: Figure = {m: {n: [] for n in METHOD_NAMES} for m in srole_models()}
    at25: dict[str, list[SimOutcome]] = {n: [] for n in METHOD_NAMES}
    tally = tally or Tally()
    for model in srole_models():
        for n_edges in edges or p.edges:
            tick(f"JCT: {model}, {n_edges} edges")
            for name in METHOD_NAMES:
                out = tally.add(name, case(name, bases[name], n_edges, model, 100.0, p.rounds,
                                           seed, partitions=p.partitions,
                                           conditions=conditions))
                jct[model][name].append(float(np.median(out.round_jct_s())))
                if n_edges == max(p.edges):
                    at25[name].append(out)
    return jct, at25


def load_figure(bases: dict[str, QAgent], p: Protocol, seed: int, tick: Tick,
                tally: Tally) -> Figure:
    """Median and range of tasks per device and of CPU, memory and bandwidth utilisation
    (Figs. 5–6)."""
    out: Figure = {}
    top = max(p.edges)
    for model in srole_models():
        out[model] = {}
        for w in p.workloads:
            tick(f"load: {model}, {w:.0f} %")
            for name in METHOD_NAMES:
                res = tally.add(name, case(name, bases[name], top, model, w, p.rounds // 2,
                                           seed, partitions=p.partitions)).rounds
                tasks = [t for r in res for t in r.tasks if t > 0]
                u = np.concatenate([r.utilisation for r in res])
                out[model].setdefault(name, {})[f"{w:.0f}"] = {
                    "tasks_median": float(np.median(tasks)), "tasks_min": int(min(tasks)),
                    "tasks_max": int(max(tasks)),
                    "cpu_util_median": float(np.median(u[:, 0])),
                    "mem_util_median": float(np.median(u[:, 1])),
                    "net_util_median": float(np.median(u[:, 2])),
                    "cpu_util_p95": float(np.percentile(u[:, 0], 95))}
    return out


def collision_figure(bases: dict[str, QAgent], p: Protocol, seed: int, tick: Tick,
                     tally: Tally) -> Figure:
    """Collisions per round vs κ at the largest network, mean over the three models
    (Fig. 8); SROLE-C/D pre-trained with each κ, MARL and RL do not use κ."""
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
                   for r in tally.add(name, case(name, base, top, m, 100.0, p.rounds, seed,
                                                 kappa, p.partitions)).rounds]
            row[name] = {"collisions": _mean([r.collisions_after for r in res]),
                         "proposed_collisions": _mean([r.collisions for r in res]),
                         "unsafe_proposed": _mean([r.unsafe for r in res]),
                         "overloaded_after": _mean([r.overloaded_after for r in res])}
        out[f"{kappa:.0f}"] = row
    return out


def overhead(at25: dict[str, list[SimOutcome]]) -> tuple[Figure, Figure]:
    """Per method the mean decision and shield work per round (deterministic), and apart
    the mean wall seconds of both (timings)."""
    work, wall = {}, {}
    for n, outs in at25.items():
        res = [r for o in outs for r in o.rounds]
        work[n] = {"decision_ops": _mean([r.decision_ops for r in res]),
                   "shield_ops": _mean([r.shield_ops for r in res])}
        wall[n] = {"decision_wall_s": _mean([o.timings["decision_seconds"] for o in outs]),
                   "shield_wall_s": _mean([o.timings["shield_seconds"] for o in outs])}
    return work, wall


def headline(jct: Figure, kappa_fig: Figure, work: Figure) -> Figure:
    """The reductions the paper reports: JCT (Fig. 4) and collisions at κ = 100 (Fig. 8) of
    SROLE-C/D against MARL and RL (and IQL), and the shields' work ratio (Fig. 7)."""
    def red(a: str, b: str) -> list[float]:
        return [reduction(x, y) for m in jct for x, y in zip(jct[m][a], jct[m][b],
                                                             strict=True)]

    col = kappa_fig[f"{KAPPA:.0f}"]
    out: Figure = {f"jct_reduction_{a.replace('-', '_')}_vs_{b}": _mean(red(a, b))
                   for a, b in (("srole-c", "marl"), ("srole-d", "marl"), ("srole-c", "rl"),
                                ("srole-d", "rl"), ("srole-c", "iql"), ("marl", "iql"))}
    out |= {"jct_reduction_srole_c_vs_marl_range": [min(red("srole-c", "marl")),
                                                    max(red("srole-c", "marl"))],
            "shield_ops_ratio_d_to_c": (work["srole-d"]["shield_ops"]
                                        / max(work["srole-c"]["shield_ops"], 1e-12))}
    for s in ("c", "d"):
        for key, fld in (("collision_reduction", "collisions"),
                         ("proposed_collision_reduction", "proposed_collisions")):
            out[f"{key}_srole_{s}"] = reduction(col[f"srole-{s}"][fld], col["marl"][fld])
            out[f"{key}_srole_{s}_vs_rl"] = reduction(col[f"srole-{s}"][fld], col["rl"][fld])
    return out
