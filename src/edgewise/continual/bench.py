"""Ekya's evaluation (§6.2-6.3) on the trace-driven simulator, as the kit's BenchSpec: Figures
6-8 and 10, Table 3, the headline gain read both ways, and E1's real windows."""

from __future__ import annotations

from dataclasses import replace

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures, Ticker
from edgewise.continual.defaults import DEFAULTS, BenchDefaults
from edgewise.continual.headline import LABELS, gain_figures, saving_and_capacity
from edgewise.continual.policies import get_policy
from edgewise.continual.policies.variants import fixed_config_policy, fixed_res_policy
from edgewise.continual.setting import Setting, baselines, holdout_configs, tested_trace
from edgewise.continual.sim import simulate
from edgewise.continual.traces import default_trace, default_trace_source

__all__ = ["QUICK", "SPEC", "Setting", "baselines", "holdout_configs", "simulated",
           "tested_trace"]

QUICK = replace(DEFAULTS, stream_counts=(2, 6, 10), accelerator_grid=(1.0, 2.0, 4.0, 8.0, 16.0),
                delta_grid=(1.0, 0.5, 0.25, 0.1), profile_errors=(0.0, 0.1))
"""``--quick``: fewer points per sweep (and 2 windows of the trace)."""


def _streams_sweep(s: Setting, tick: Ticker) -> dict[str, dict[str, list[float]]]:
    """Figure 6: mean accuracy vs number of streams at a fixed number of accelerators."""
    out: dict[str, dict[str, list[float]]] = {}
    for g in s.d.headline_accelerators:
        tick(f"streams sweep, {g:g} accelerators")
        out[f"{g:g}"] = {name: [s.accuracy(p, n, g) for n in s.d.stream_counts]
                         for name, p in s.policies.items()}
    return out


def _accelerator_sweep(s: Setting, tick: Ticker) -> dict[str, dict[float, float]]:
    """Figure 7: accuracy of the stressed stream count vs provisioned accelerators."""
    out: dict[str, dict[float, float]] = {}
    for name, p in s.policies.items():
        tick(f"accelerator sweep, {name}")
        out[name] = {g: s.accuracy(p, s.d.stressed_streams, g) for g in s.d.accelerator_grid}
    return out


def _factors(s: Setting, tick: Ticker) -> dict[str, dict[str, float]]:
    """Figure 8: thief vs Ekya-FixedRes (the uniform 50% split) vs Ekya-FixedConfig (the
    uniform's Config 2), at the stressed stream count."""
    tick("factor analysis")
    pols = {"thief": get_policy("thief"), "fixed_res": fixed_res_policy(0.5),
            "fixed_config": fixed_config_policy(s.low)}
    out: dict[str, dict[str, float]] = {}
    n = s.d.stressed_streams
    for g in (1.0, 2.0, 4.0, 8.0):
        row = {k: s.accuracy(p, n, g) for k, p in pols.items()}
        row["best_uniform"] = max(s.accuracy(p, n, g) for p in s.uniform.values())
        out[f"{g:g}"] = row
    return out


def _checkpoint_gains(s: Setting, tick: Ticker, planner: str) -> dict[str, float]:
    """The gain over the best uniform at the stressed stream count when inference serves
    every epoch's checkpoint for every policy (``serve_checkpoints``, §4.2/§5); the thief
    plans with ``planner`` (``thief``: the paper's estimate; ``thief-checkpoints``: the
    checkpoint-aware one). Sensitivity figures, not the protocol of the headline."""
    tick(f"checkpoints served, {planner}")
    out = {}
    for g in s.d.headline_accelerators:
        thief = s.accuracy(planner, s.d.stressed_streams, g, serve_checkpoints=True)
        best = max(s.accuracy(p, s.d.stressed_streams, g, serve_checkpoints=True)
                   for p in s.uniform.values())
        out[f"{g:g}"] = (thief - best) / best
    return out


def _delta_sweep(s: Setting, ctx: BenchContext, tick: Ticker) -> dict[str, list[float]]:
    """Figure 10: accuracy vs Δ (stressed streams, 8 accelerators); the median decision
    seconds per Δ go to the timings."""
    acc, secs = [], []
    for delta in s.d.delta_grid:
        tick(f"delta {delta:g}")
        r = simulate(s.problem(s.d.stressed_streams, 8.0, delta=delta), "thief")
        acc.append(r.mean_accuracy)
        secs.append(r.timings["decision_seconds_median"])
    ctx.timings["delta_sweep_decision_s"] = secs
    return {"delta": list(s.d.delta_grid), "accuracy": acc}


def _error_sweep(s: Setting, seed: int, tick: Ticker) -> dict[str, list[float]]:
    """Figure 11b: thief accuracy when its profiles carry N(0, σ) accuracy errors (stressed
    streams, 4 accelerators; the simulator applies the true accuracies)."""
    tick("profile error sweep")
    problem = s.problem(s.d.stressed_streams, 4.0)
    acc = [simulate(problem, "thief", seed=seed, profile_error=e).mean_accuracy
           for e in s.d.profile_errors]
    return {"profile_error": list(s.d.profile_errors), "accuracy": acc}


def _decision_time(s: Setting, ctx: BenchContext) -> None:
    """Wall time of thief decisions, stressed streams on 8 accelerators, Δ = 0.1: the median
    of the window-start decisions (every configuration open for every stream) and the max."""
    r = simulate(s.problem(s.d.stressed_streams, 8.0, delta=0.1), "thief", seed=ctx.seed)
    ctx.timings["thief_decision_seconds"] = r.timings["window_start_decision_seconds_median"]
    ctx.timings["thief_decision_seconds_max"] = r.timings["decision_seconds_max"]


def headline(ctx: BenchContext, d: BenchDefaults, windows: int) -> Figures:
    """Figures 6, 7, 8, 10, 11b and Table 3 on the shipped trace at the settings ``d``."""
    s = Setting(d, windows)
    tick = ctx.ticker(12 + len(d.delta_grid))
    sweep = _streams_sweep(s, tick)
    gpu = _accelerator_sweep(s, tick)
    result = gain_figures(sweep, list(d.stream_counts), list(s.uniform))
    result |= saving_and_capacity(sweep, gpu, list(d.stream_counts), list(s.uniform), d)
    result["factor_analysis"] = _factors(s, tick)
    result["checkpoint_gain_by_accelerators"] = _checkpoint_gains(s, tick, "thief")
    result["checkpoint_aware_gain_by_accelerators"] = _checkpoint_gains(
        s, tick, "thief-checkpoints")
    result["delta_sweep"] = _delta_sweep(s, ctx, tick)
    result["profile_error_sweep"] = _error_sweep(s, ctx.seed, tick)
    _decision_time(s, ctx)
    result |= {"seed": ctx.seed, "quick": ctx.quick, "windows": windows,
               "window_s": d.window_s, "trace_source": default_trace_source(),
               "streams_sweep": sweep, "uniform_configs": {"config1": s.high, "config2": s.low},
               "accelerator_sweep": {k: {f"{g:g}": a for g, a in v.items()}
                                     for k, v in gpu.items()},
               "stream_counts": list(d.stream_counts)}
    return result


def simulated(ctx: BenchContext) -> Figures:
    """The simulated part: the headline figures at the defaults, or with ``--sweep`` the
    sensitivity study of ``continual.sweep`` (which moves no default)."""
    if ctx.option("sweep"):
        from edgewise.continual.sweep import sweep_figures

        with ctx.timings.timed("simulated_wall_s"):
            return sweep_figures(ctx)
    d = QUICK if ctx.quick else DEFAULTS
    with ctx.timings.timed("simulated_wall_s"):
        return headline(ctx, d, 2 if ctx.quick else default_trace().windows)


def real(ctx: BenchContext) -> Figures:
    """E1's measured figures (micro-profiler, real windows on Ray); none with ``--sweep``."""
    if ctx.option("sweep"):
        return {}
    from edgewise.continual.realbench import real_figures

    return real_figures(seed=ctx.seed, quick=ctx.quick, progress=ctx.progress)


SPEC = BenchSpec(
    name="ekya",
    title="Ekya §6: thief vs uniform over streams and accelerators (trace-driven), capacity, "
          "factor analysis, Δ sensitivity, micro-profiler error, and real windows on digits "
          "(--sweep: where the headline holds).",
    simulated="edgewise.continual.bench:simulated",
    real="edgewise.continual.bench:real",
    plots="edgewise.continual.plots:plots",
    real_share=0.7,
    options=(BenchOption("sweep", False, "run the sensitivity study (gain by streams, "
                         "accelerator share and cost scale) instead of the headline",
                         kind="bool"),),
    contract_timings=("thief_decision_seconds",),
    labels=LABELS,
)
"""``edgewise bench ekya``."""
