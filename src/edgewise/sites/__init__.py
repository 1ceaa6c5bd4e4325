"""Okita: online scheduling of unbiased distributed learning jobs across edge sites
(workers, parameter servers and data transfers per time slot)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgewise.anatomy import Problem, lazy_facade

if TYPE_CHECKING:
    from edgewise.anatomy import Executor, Simulate
    from edgewise.sites.problem import Plan, SitesProblem
    from edgewise.sites.realbench import demo_problem, real_problem
    from edgewise.sites.run import (
        SiteRunConfig,
        SitesRun,
        emulated_cluster,
        execute,
        execute_emulated,
    )
    from edgewise.sites.scenario import default_scenario, load_scenario
    from edgewise.sites.sim import SimResult, plan_schedule, simulate

    # mypy checks that the package's parts fit the anatomy's contracts
    _SIMULATE: Simulate[SitesProblem] = simulate
    _EXECUTE: Executor[SitesProblem, Plan] = execute

PROBLEM = Problem(
    name="sites", paper="okita.md",
    title="Okita: online scheduling of learning jobs across edge sites",
    problem_type="SitesProblem", plan_type="Plan", outcome_type="SimResult",
    bench="okita",
    bench_line="Okita §V: online schedulers vs the offline optimum, and a real run.",
    job_kinds=("sites",), order=4, executor_takes="plan",
    policy_kind=("a factory of an OnlinePolicy that decides slot by slot (plan_schedule runs it "
                   "ahead of execute)"))
"""This problem's card (entry point ``edgewise.problems``): the one place it is named."""

__getattr__ = lazy_facade(__name__, __file__)  # the names of the TYPE_CHECKING block

__all__ = [
    "PROBLEM", "Plan", "SimResult", "SiteRunConfig", "SitesProblem", "SitesRun",
    "default_scenario", "demo_problem", "emulated_cluster", "execute", "execute_emulated",
    "load_scenario", "plan_schedule", "real_problem", "simulate",
]  # fmt: skip
