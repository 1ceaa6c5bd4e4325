"""`edgewise bench okita`: the §V-B/§V-C simulations of the Okita paper, and a real run.

1. The default scenario (R = 50 sites, T = 150 slots, I = 100 jobs, exponential latency):
   total cost of okita, fifo, drf and oasis; cost reductions 1 - okita / baseline; okita's
   running time (wall clock of its per-slot decisions, in ``timings``).
2. Total cost vs the number of sites (Fig. 9) and of jobs (Fig. 10), all policies.
3. Sensitivity of okita to α1:α2 (Fig. 11) and to β1, β2, β3 (Fig. 12).
4. The three latency cost functions (Fig. 14), all policies.
5. Performance ratio cost / offline optimum (HiGHS MILP) on small instances (Fig. 7, 8).
6. Running time vs the number of jobs (Fig. 13; wall clock, in ``timings``).
Every schedule is checked against (2a)-(2g) by the independent validator. The real part
(:mod:`edgewise.sites.realbench`) carries a small scenario out on Ray.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from edgewise.bench import BenchContext, BenchSpec, Figures
from edgewise.errors import InfeasibleError
from edgewise.sites.problem import SitesProblem
from edgewise.sites.scenario import default_scenario, tiny_scenario
from edgewise.sites.sim import SimResult, simulate
from edgewise.sites.validate import check_plan

__all__ = ["BASELINES", "ONLINE", "SPEC", "real", "simulated"]

ONLINE = ("okita", "fifo", "drf", "oasis")
BASELINES = ("fifo", "drf", "oasis")
ALPHAS = ((1.0, 4.0), (1.0, 2.0), (1.0, 1.0), (2.0, 1.0), (4.0, 1.0))
BETAS = ((1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (1.0, 2.0, 1.0), (1.0, 1.0, 2.0), (0.5, 0.5, 1.0))
KINDS = ("exponential", "linear", "piecewise")
Tick = Callable[[str], None]


def _grid(quick: bool) -> tuple[tuple[int, int], ...]:
    """(sites, jobs) of the performance-ratio instances."""
    return ((2, 2), (3, 2)) if quick else ((2, 2), (3, 2), (3, 3), (4, 3))


def _axes(quick: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Site counts and job counts of the two cost sweeps."""
    return ((6, 12), (8, 16)) if quick else ((10, 20, 30, 40, 50), (20, 40, 60, 80, 100))


class _Runner:
    """Runs (scenario, policy) pairs once each, validating every schedule."""

    def __init__(self, seed: int, base: dict[str, int]) -> None:
        self.seed, self.base = seed, base
        self.cache: dict[tuple[Any, ...], SimResult] = {}

    def scenario(self, **over: Any) -> SitesProblem:
        return default_scenario(self.seed, **{**self.base, **over})

    def run(self, policy: str, **over: Any) -> SimResult:
        key = (policy, tuple(sorted({**self.base, **over}.items())))
        if key not in self.cache:
            problem = self.scenario(**over)
            result = simulate(problem, policy, seed=self.seed)
            check_plan(problem, result.plan)
            self.cache[key] = result
        return self.cache[key]


def _summary(r: SimResult) -> dict[str, float | int]:
    return {"total": r.cost.total, "latency": r.cost.latency,
            "data_transfer": r.cost.data_transfer,
            "parameter_exchange": r.cost.parameter_exchange, "makespan": r.makespan,
            "unfinished": len(r.unfinished)}


def _ratio_row(n_sites: int, n_jobs: int, s: int, ratios: dict[str, list[float]]
               ) -> dict[str, Any]:
    """One tiny instance: each online policy's cost over the optimum (kept for the summary
    only when the policy finishes by T, as the offline problem must)."""
    problem = tiny_scenario(s, n_sites=n_sites, n_jobs=n_jobs)
    try:
        opt = simulate(problem, "offline-opt", seed=s)
    except InfeasibleError as exc:          # no proven optimum within the time limit
        return {"sites": n_sites, "jobs": n_jobs, "seed": s, "error": str(exc)}
    check_plan(problem, opt.plan)
    row: dict[str, Any] = {"sites": n_sites, "jobs": n_jobs, "seed": s,
                           "optimum": opt.total_cost}
    for policy in ONLINE:
        r = simulate(problem, policy, seed=s)
        check_plan(problem, r.plan)
        row[policy] = r.total_cost / opt.total_cost
        if r.slots_run <= problem.horizon:
            ratios[policy].append(row[policy])
    return row


def _ratios(seed: int, quick: bool, tick: Tick) -> dict[str, Any]:
    """Fig. 7/8: cost / offline optimum on small instances of (sites, jobs); instances where
    an online policy finishes after T (outside the offline problem) are counted apart."""
    seeds = range(seed, seed + (2 if quick else 4))
    ratios: dict[str, list[float]] = {p: [] for p in ONLINE}
    rows = []
    for n_sites, n_jobs in _grid(quick):
        tick(f"performance ratio: {n_sites} sites, {n_jobs} jobs")
        rows += [_ratio_row(n_sites, n_jobs, s, ratios) for s in seeds]
    return {"instances": rows,
            "max": {p: max(v) for p, v in ratios.items() if v},
            "mean": {p: statistics.fmean(v) for p, v in ratios.items() if v}}


def _sweeps(run: _Runner, quick: bool, tick: Tick) -> tuple[Figures, dict[int, float]]:
    """Fig. 9-12 and 14; okita's decision seconds vs the number of jobs (Fig. 13) apart."""
    sites, jobs = _axes(quick)
    out: Figures = {"cost_vs_sites": {}, "cost_vs_jobs": {}}
    seconds: dict[int, float] = {}
    for n in sites:
        tick(f"cost vs sites: R = {n}")
        out["cost_vs_sites"][n] = {p: run.run(p, n_sites=n).cost.total for p in ONLINE}
    for n in jobs:
        tick(f"cost vs jobs: I = {n}")
        out["cost_vs_jobs"][n] = {p: run.run(p, n_jobs=n).cost.total for p in ONLINE}
        seconds[n] = run.run("okita", n_jobs=n).timings["decision_seconds"]
    tick("sensitivity to alpha")
    out["alpha"] = {f"{a1:g}:{a2:g}": run.run("okita", alpha=(a1, a2)).cost.total
                    for a1, a2 in ALPHAS}
    tick("sensitivity to beta")
    out["beta"] = {",".join(f"{b:g}" for b in beta): run.run("okita", beta=beta).cost.total
                   for beta in BETAS}
    out["latency_functions"] = {}
    for kind in KINDS:
        tick(f"latency function: {kind}")
        out["latency_functions"][kind] = {p: run.run(p, latency=kind).cost.total
                                          for p in ONLINE}
    return out, seconds


def simulated(ctx: BenchContext) -> Figures:
    """The protocol above; ``--quick`` shrinks every scenario (12 sites, 16 jobs, 30 slots
    instead of 50, 100, 150). Wall-clock figures go to ``ctx.timings``."""
    base = {"n_sites": 12, "n_jobs": 16, "horizon": 30} if ctx.quick else \
        {"n_sites": 50, "n_jobs": 100, "horizon": 150}
    sites, jobs = _axes(ctx.quick)
    tick = ctx.ticker(1 + len(_grid(ctx.quick)) + len(sites) + len(jobs) + 2 + len(KINDS))
    run = _Runner(ctx.seed, base)
    tick("default scenario")
    default = {p: run.run(p) for p in ONLINE}
    report: Figures = {"seed": ctx.seed, "quick": ctx.quick, "default_scenario": base,
                       "default": {p: _summary(r) for p, r in default.items()}}
    okita = default["okita"].timings
    ctx.timings["runtime_seconds_default_scenario"] = okita["decision_seconds"]
    ctx.timings["runtime_cpu_seconds_default_scenario"] = okita["decision_cpu_seconds"]
    ctx.timings["default"] = {p: {"runtime_s": r.timings["decision_seconds"],
                                  "cpu_s": r.timings["decision_cpu_seconds"]}
                              for p, r in default.items()}
    for b in BASELINES:
        report[f"cost_reduction_vs_{b}"] = 1.0 - default["okita"].total_cost / \
            default[b].total_cost
    ratio = _ratios(ctx.seed, ctx.quick, tick)
    report["performance_ratio_max"] = ratio["max"].get("okita", float("nan"))
    report["performance_ratio_mean"] = ratio["mean"].get("okita", float("nan"))
    report["performance_ratio"] = ratio
    sweeps, seconds = _sweeps(run, ctx.quick, tick)
    report.update(sweeps)
    ctx.timings["runtime_vs_jobs"] = seconds
    return report


def real(ctx: BenchContext) -> Figures:
    """The real run on Ray (:func:`edgewise.sites.realbench.real_figures`); its run seconds
    go to ``ctx.timings``."""
    from edgewise.sites.realbench import real_figures

    ctx.progress("real run on Ray", 0.0)
    figures: Figures = dict(real_figures(ctx.seed, ctx.quick, ctx.progress))
    ctx.timings["real_run_seconds"] = figures.pop("real_run_seconds")
    return figures


_NO_CAP = ("1 - okita / {} total cost on the simulated default scenario; about 1 because the "
           "exponential latency cost has no cap and the baseline's fixed worker counts let a "
           "few jobs run for dozens of slots (docs/okita.md)")

SPEC = BenchSpec(
    name="okita",
    title="Okita §V: cost vs sites and jobs, sensitivity, latency functions, ratio to the "
          "offline optimum, running time, and a real run with migrations.",
    simulated="edgewise.sites.bench:simulated",
    real="edgewise.sites.bench:real",
    plots="edgewise.sites.plots:plots",
    real_share=0.5,
    contract_timings=("runtime_seconds_default_scenario",),
    labels={
        "cost_reduction_vs_fifo": _NO_CAP.format("fifo"),
        "cost_reduction_vs_drf": _NO_CAP.format("drf"),
        "performance_ratio_max": "okita's cost over the exact offline optimum (HiGHS MILP), "
                                 "worst of the tiny instances okita finishes by T",
        "real_run_restore_accuracy_gap": "a consistency check of the runtime (a restored "
                                         "checkpoint's accuracy vs the accuracy before the "
                                         "move), not a property of the schedule",
    },
)
"""``edgewise bench okita``."""
