"""One configuration of the Ekya bench and its sweep: the tested trace (the shipped trace's
streams at a cost scale), Config 1 and 2 picked on its hold-out streams, the uniform
baselines, and the policies compared (a module of its own, so that ``bench`` and
``sweep`` both import it and not each other)."""

from __future__ import annotations

from dataclasses import replace

from edgewise.continual.defaults import DEFAULTS, BenchDefaults
from edgewise.continual.policies import Policy, get_policy
from edgewise.continual.policies.uniform import pareto_configs, uniform_policy
from edgewise.continual.problem import RetrainOption
from edgewise.continual.profiles import Trace
from edgewise.continual.sim import TraceProblem, simulate
from edgewise.continual.traces import default_trace

__all__ = ["Setting", "baselines", "holdout_configs", "tested_trace"]


def holdout_configs(holdout: Trace) -> tuple[str, str]:
    """Config 1 and Config 2 (§6.1) from the hold-out streams' profiles in every window."""
    return pareto_configs([[RetrainOption(c, holdout.curves[(w, s, c)].final,
                                          holdout.curves[(w, s, c)].cost_s)
                            for c in holdout.configs]
                           for w in range(holdout.windows) for s in holdout.streams])


def baselines(high: str, low: str, d: BenchDefaults = DEFAULTS) -> dict[str, Policy]:
    """The uniform baselines of Figure 6: Config 1 (``high``) or Config 2 (``low``), each
    with a static share of the stream's accelerators for inference."""
    chosen = {"C1": high, "C2": low}
    return {f"uniform-{k}-{round(f * 100)}": uniform_policy(chosen[k], f)
            for k, f in d.uniform_splits}


def tested_trace(d: BenchDefaults = DEFAULTS) -> tuple[Trace, tuple[str, str]]:
    """The shipped trace's tested streams (at ``d``'s cost scale) and Config 1/2 from its
    hold-out streams (picked on the same scale)."""
    trace = default_trace()
    if d.trace_cost_scale != 1.0:
        trace = trace.with_cost_scale(d.trace_cost_scale)
    split = len(trace.streams) - d.holdout_streams
    return (trace.subset(trace.streams[:split]),
            holdout_configs(trace.subset(trace.streams[split:])))


class Setting:
    """One bench configuration: the tested trace, windows, Δ, a_MIN and the policies."""

    def __init__(self, d: BenchDefaults, windows: int) -> None:
        self.d, self.windows = d, windows
        self.trace, (self.high, self.low) = tested_trace(d)
        self.uniform = baselines(self.high, self.low, d)
        self.policies: dict[str, Policy] = {"thief": get_policy("thief"), **self.uniform}

    def problem(self, streams: int, accelerators: float, **kw: object) -> TraceProblem:
        base = TraceProblem(self.trace, accelerators, self.d.window_s, self.d.delta,
                            self.d.a_min, self.windows)
        return replace(base, **kw).first_streams(streams)  # type: ignore[arg-type]

    def accuracy(self, policy: Policy | str, streams: int, accelerators: float,
                 **kw: object) -> float:
        return simulate(self.problem(streams, accelerators, **kw), policy).mean_accuracy
