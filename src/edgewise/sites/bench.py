"""`edgewise bench okita`: the §V-B/§V-C simulations of the Okita paper.

1. The default scenario (R = 50 sites, T = 150 slots, I = 100 jobs, exponential latency):
   total cost of okita, fifo, drf and oasis; cost reductions 1 - okita / baseline; okita's
   running time (wall clock of its per-slot decisions).
2. Total cost vs the number of sites (Fig. 9) and of jobs (Fig. 10), all policies.
3. Sensitivity of okita to α1:α2 (Fig. 11) and to β1, β2, β3 (Fig. 12).
4. The three latency cost functions (Fig. 14), all policies.
5. Performance ratio cost / offline optimum (HiGHS MILP) on small instances (Fig. 7, 8).
6. Running time vs the number of jobs (Fig. 13).
Every schedule is checked against (2a)-(2g) by the independent validator.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgewise.errors import InfeasibleError
from edgewise.sites.problem import SitesProblem
from edgewise.sites.scenario import default_scenario, tiny_scenario
from edgewise.sites.sim import SimResult, simulate
from edgewise.sites.validate import check_plan

__all__ = ["BASELINES", "ONLINE", "run_okita_bench"]

Progress = Callable[[str, float], None]
ONLINE = ("okita", "fifo", "drf", "oasis")
BASELINES = ("fifo", "drf", "oasis")
ALPHAS = ((1.0, 4.0), (1.0, 2.0), (1.0, 1.0), (2.0, 1.0), (4.0, 1.0))
BETAS = ((1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (1.0, 2.0, 1.0), (1.0, 1.0, 2.0), (0.5, 0.5, 1.0))


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
            result = simulate(problem, policy, self.seed)
            check_plan(problem, result.plan)
            self.cache[key] = result
        return self.cache[key]


def _summary(r: SimResult) -> dict[str, float | int]:
    return {"total": r.cost.total, "latency": r.cost.latency,
            "data_transfer": r.cost.data_transfer,
            "parameter_exchange": r.cost.parameter_exchange, "makespan": r.makespan,
            "runtime_s": r.runtime_s, "cpu_s": r.cpu_s, "unfinished": len(r.unfinished)}


def _ratios(seed: int, quick: bool, progress: Progress) -> dict[str, Any]:
    """Fig. 7/8: cost / offline optimum on small instances of (sites, jobs); instances where
    an online policy finishes after T (outside the offline problem) are counted apart."""
    grid = ((2, 2), (3, 2)) if quick else ((2, 2), (3, 2), (3, 3), (4, 3))
    seeds = range(seed, seed + (2 if quick else 4))
    ratios: dict[str, list[float]] = {p: [] for p in ONLINE}
    rows = []
    for n_sites, n_jobs in grid:
        for s in seeds:
            problem = tiny_scenario(s, n_sites=n_sites, n_jobs=n_jobs)
            try:
                opt = simulate(problem, "offline-opt", s)
            except InfeasibleError as exc:          # no proven optimum within the time limit
                rows.append({"sites": n_sites, "jobs": n_jobs, "seed": s, "error": str(exc)})
                continue
            check_plan(problem, opt.plan)
            row: dict[str, Any] = {"sites": n_sites, "jobs": n_jobs, "seed": s,
                                   "optimum": opt.total_cost}
            for policy in ONLINE:
                r = simulate(problem, policy, s)
                check_plan(problem, r.plan)
                row[policy] = r.total_cost / opt.total_cost
                if r.slots_run <= problem.horizon:
                    ratios[policy].append(row[policy])
            rows.append(row)
        progress(f"performance ratio: {n_sites} sites, {n_jobs} jobs", 0.0)
    return {"instances": rows,
            "max": {p: max(v) for p, v in ratios.items() if v},
            "mean": {p: statistics.fmean(v) for p, v in ratios.items() if v}}


def _sweeps(run: _Runner, quick: bool, progress: Progress) -> dict[str, Any]:
    sites = (6, 12) if quick else (10, 20, 30, 40, 50)
    jobs = (8, 16) if quick else (20, 40, 60, 80, 100)
    out: dict[str, Any] = {"cost_vs_sites": {}, "cost_vs_jobs": {}, "runtime_vs_jobs": {}}
    for n in sites:
        out["cost_vs_sites"][n] = {p: run.run(p, n_sites=n).cost.total for p in ONLINE}
        progress(f"cost vs sites: R = {n}", 0.0)
    for n in jobs:
        out["cost_vs_jobs"][n] = {p: run.run(p, n_jobs=n).cost.total for p in ONLINE}
        out["runtime_vs_jobs"][n] = run.run("okita", n_jobs=n).runtime_s
        progress(f"cost vs jobs: I = {n}", 0.0)
    out["alpha"] = {f"{a1:g}:{a2:g}": run.run("okita", alpha=(a1, a2)).cost.total
                    for a1, a2 in ALPHAS}
    progress("sensitivity to alpha", 0.0)
    out["beta"] = {",".join(f"{b:g}" for b in beta): run.run("okita", beta=beta).cost.total
                   for beta in BETAS}
    progress("sensitivity to beta", 0.0)
    out["latency_functions"] = {}
    for kind in ("exponential", "linear", "piecewise"):
        out["latency_functions"][kind] = {p: run.run(p, latency=kind).cost.total
                                          for p in ONLINE}
        progress(f"latency function: {kind}", 0.0)
    return out


def run_okita_bench(seed: int = 0, quick: bool = False, include_real: bool = True,
                    progress: Progress | None = None,
                    plots_dir: Path | None = None) -> dict[str, object]:
    """Run the protocol above; ``quick`` shrinks every scenario (for tests and smoke runs:
    12 sites, 16 jobs, 30 slots instead of 50, 100, 150). The real run (O2's
    ``edgewise.sites.realbench.real_figures``) is merged when ``include_real``."""
    tell = progress or (lambda _msg, _frac: None)
    base = {"n_sites": 12, "n_jobs": 16, "horizon": 30} if quick else \
        {"n_sites": 50, "n_jobs": 100, "horizon": 150}
    run = _Runner(seed, base)
    default = {p: run.run(p) for p in ONLINE}
    tell("default scenario", 0.2)
    report: dict[str, object] = {
        "seed": seed, "quick": quick, "default_scenario": base,
        "default": {p: _summary(r) for p, r in default.items()},
        "runtime_seconds_default_scenario": default["okita"].runtime_s,
        "runtime_cpu_seconds_default_scenario": default["okita"].cpu_s,
    }
    for b in BASELINES:
        report[f"cost_reduction_vs_{b}"] = 1.0 - default["okita"].total_cost / \
            default[b].total_cost
    ratio = _ratios(seed, quick, lambda m, f: tell(m, 0.3))
    report["performance_ratio_max"] = ratio["max"].get("okita", float("nan"))
    report["performance_ratio_mean"] = ratio["mean"].get("okita", float("nan"))
    report["performance_ratio"] = ratio
    report.update(_sweeps(run, quick, lambda m, f: tell(m, 0.6)))
    if plots_dir is not None:
        from edgewise.sites.plots import write_plots

        report["plots"] = [str(p) for p in write_plots(report, Path(plots_dir))]
    if include_real:
        from edgewise.sites.realbench import real_figures

        tell("real run on Ray", 0.9)
        report.update(real_figures(seed, quick, progress))
    tell("done", 1.0)
    return report
