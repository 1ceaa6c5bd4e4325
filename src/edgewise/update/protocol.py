"""The pieces of Deep-Edge's §V-C protocol that the benchmark and its sweep share: learned
models fitted on calibrated profiles, the pressure margin, and one experiment planned with
the learned models and with the true ones, both scored by the truth."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from edgewise.errors import InfeasibleError
from edgewise.perf.calibrated import CalibratedDevice, calibrated, sample_profile
from edgewise.perf.learned import FitMemo, LearnedDevice
from edgewise.perf.pressure import pressure_mape
from edgewise.perf.schema import PerfModel
from edgewise.update.experiments import testbed_problem
from edgewise.update.policies import REGISTRY
from edgewise.update.problem import MEM_LIMIT_PERCENT, UpdatePlan, UpdateProblem
from edgewise.update.sim import score

__all__ = ["DEVICE_TYPES", "REPEATABLE_TRIALS", "FitSettings", "Models", "drawn_experiment",
           "fair_on", "learn", "perfect_model_figures", "pressure_margins", "with_models"]

DEVICE_TYPES = ("jetson-tx2", "jetson-nano")
Models = Mapping[str, PerfModel]
"""Performance models by device type (learned, or the calibrated ground truth)."""
MAX_REDRAWS = 100
REPEATABLE_TRIALS = 8  # AutoML trials per function of a repeatable fit: MAPEs close to 6 s fits
FIT_TRIALS = 30  # the bench's default fit: `edgewise update fit`'s default trials per function


@dataclass(frozen=True, slots=True)
class FitSettings:
    """How the learned models are fitted: ``rows`` profile rows per device type, and either
    ``trials`` AutoML trials per function (repeatable: the same seed gives the same models,
    whatever the host's load) or, when ``trials`` is None, ``budget_s`` AutoML seconds per
    function (how many trials that buys depends on the host)."""

    rows: int = 1650
    budget_s: float = 6.0
    trials: int | None = FIT_TRIALS


def learn(seed: int, fit: FitSettings, truth: Mapping[str, CalibratedDevice] | None = None,
          memo: FitMemo | None = None
          ) -> tuple[dict[str, LearnedDevice], dict[str, pd.DataFrame]]:
    """Fit the paper's functions for each device type on a profile sampled from ``truth``
    (default: the calibrated models); returns the models and the profiles they were fitted
    on. ``memo`` reuses trial-bounded fits whose data did not change."""
    from edgewise.perf.fitting import fit_models  # AutoML (FLAML, which imports Ray): on use

    rng = np.random.default_rng(seed)
    models = truth or {t: calibrated(t) for t in DEVICE_TYPES}
    profiles = {t: sample_profile(t, fit.rows, rng, model=models[t]) for t in DEVICE_TYPES}
    budget = None if fit.trials is not None else fit.budget_s
    learned = {t: fit_models(p, t, time_budget_s=budget, max_trials=fit.trials, seed=seed,
                             memo=memo)
               for t, p in profiles.items()}
    return learned, profiles


def pressure_margins(learned: Mapping[str, LearnedDevice], profiles: Mapping[str, pd.DataFrame],
                     seed: int) -> dict[str, float]:
    """Relative error to leave between δ and the deadline, per device type, so that
    δ^a = deadline / (1 + margin): the held-out MAPE of the pressure on SIFT as Algorithm 1
    evaluates it, EstExecTime(EstState(X, b)) for batches within GetMaxBatchSize's memory
    limit (``perf.pressure``). Table I's EstExecTime MAPE is not that error: it feeds the
    measured (noisy) new state to the model and is dominated by swapping states (memory
    above the limit) that no plan reaches. Where no held-out row lies within the limit,
    the margin falls back to that larger Table I figure."""
    out = {}
    for dtype, model in learned.items():
        mape = pressure_mape(model, profiles[dtype], "sift", mem_limit_percent=MEM_LIMIT_PERCENT,
                             seed=seed)
        if mape is None:
            mape = next(r["mape_mean"] for r in model.mape if r["function"] == "EstExecTime[sift]")
        out[dtype] = (mape or 0.0) / 100.0
    return out


def with_models(problem: UpdateProblem, models: Models,
                margins: Mapping[str, float]) -> UpdateProblem:
    """The same experiment planned with ``models``: each app's threshold δ^a becomes its
    deadline / (1 + the margin of its device type) (no margin: δ^a = the deadline)."""
    workers = tuple(replace(w, apps=tuple(
        replace(a, threshold_ms=a.deadline / (1 + margins.get(w.device_type, 0.0)),
                deadline_ms=a.deadline) for a in w.apps)) for w in problem.workers)
    return replace(problem, workers=workers, models=models)


def fair_on(problem: UpdateProblem, devices: tuple[str, ...],
            rng: np.random.Generator) -> UpdatePlan:
    """The fair rule over the devices deep-edge chose (isolates sharding and batch sizes)."""
    keep = tuple(w for w in problem.workers if w.device in devices)
    return REGISTRY.get("fair")(replace(problem, workers=keep), rng)


def drawn_experiment(rng: np.random.Generator, models: Models, truth: Models,
                     margins: Mapping[str, float], policies: tuple[str, ...]
                     ) -> tuple[UpdateProblem, dict[str, UpdatePlan], int]:
    """One random testbed experiment whose ``policies`` all find a plan with ``models``,
    redrawn while one does not (the paper only ran experiments whose model update was
    feasible): the problem, the plans and the number of redraws."""
    redraws = 0
    while True:
        problem = testbed_problem(rng, models, truth, margins)
        try:
            return problem, {n: REGISTRY.get(n)(problem, rng) for n in policies}, redraws
        except InfeasibleError:
            redraws += 1
            if redraws >= MAX_REDRAWS:
                raise


def perfect_model_figures(problem: UpdateProblem, truth: Models, fair_batch: int,
                          rng: np.random.Generator) -> dict[str, float]:
    """The experiment planned by deep-edge and fair with the true models (δ^a = the
    deadline), scored by them: the upper bound of what any learned model could give.
    NaN speedup where a policy finds no plan."""
    perfect = with_models(problem, truth, {})
    try:
        de = score(perfect, REGISTRY.get("deep-edge")(perfect, rng), truth)
        fair = score(perfect, REGISTRY.get("fair")(replace(perfect, user_batch=fair_batch),
                                                   rng), truth)
    except InfeasibleError:
        return {"speedup_perfect": math.nan, "violations_de_perfect": 0,
                "violations_fair_perfect": 0}
    return {"speedup_perfect": fair.epoch_s / de.epoch_s,
            "violations_de_perfect": len(de.violations),
            "violations_fair_perfect": len(fair.violations)}
