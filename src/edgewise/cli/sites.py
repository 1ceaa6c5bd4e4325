"""`edgewise sites ...`: Okita's online schedule of learning jobs across edge sites —
simulate policies, print a schedule, and run one for real on emulated sites."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgewise.cli.common import Address, err, out, user_errors
from edgewise.cli.stages import stage
from edgewise.cli.tables import compact, print_fitted
from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.runtime.ray_cluster import connect
from edgewise.sites import (
    Plan,
    SimResult,
    SiteRunConfig,
    SitesProblem,
    SitesRun,
    default_scenario,
    demo_problem,
    emulated_cluster,
    execute,
    execute_emulated,
    load_scenario,
    plan_schedule,
    real_problem,
    simulate,
)

__all__ = ["app", "demo_part", "plan_json", "plan_table", "run_json", "run_table", "sim_json",
           "sim_table"]

app = typer.Typer(help="Learning jobs across edge sites (Okita): simulate, plan, run.",
                  no_args_is_help=True)

Scenario = Annotated[Path | None, typer.Argument(
    help="scenario YAML (default: the §V-B generator for simulate/plan, the real-run "
         "scenario for run)", show_default=False)]
PolicyOpt = typer.Option("okita", "--policy", "-p",
                         help="okita, fifo, drf, oasis or offline-opt")
SeedOpt = typer.Option(0, min=0, help="seed of the generator and the policy")
AsJson = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]


def _scenario(file: Path | None, seed: int, sites: int, jobs: int, horizon: int) -> SitesProblem:
    if file is not None:
        return load_scenario(file)
    return default_scenario(seed, n_sites=sites, n_jobs=jobs, horizon=horizon)


def sim_table(problem: SitesProblem, results: list[SimResult]) -> Table:
    """One row per policy: total cost (latency + bandwidth), makespan, finished jobs."""
    table = Table(title=f"{problem.n_sites} sites, {len(problem.jobs)} jobs, "
                        f"T = {problem.horizon} slots")
    for col in ("policy", "total cost", "latency", "data transfer", "parameter exchange",
                "makespan (slots)", "finished", "policy time s"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in results:
        table.add_row(r.policy, compact(r.total_cost), compact(r.cost.latency),
                      compact(r.cost.data_transfer), compact(r.cost.parameter_exchange),
                      str(r.makespan), f"{len(problem.jobs) - len(r.unfinished)}/"
                      f"{len(problem.jobs)}", f"{r.timings['decision_seconds']:.3f}")
    return table


def plan_table(problem: SitesProblem, plan: Plan) -> Table:
    """The per-slot schedule: workers per site y_i^r(t), PS site, chunks trained where."""
    names = [s.name for s in problem.sites]
    table = Table(title=f"{plan.policy} schedule")
    for col in ("slot", "job", "workers", "PS site", "local chunks", "moved chunks"):
        table.add_column(col, justify="right" if col == "slot" else "left")
    for e in plan.entries:
        local = ", ".join(f"{names[g.dst]}: {g.chunks}" for g in e.transfers
                          if g.src == g.dst and g.chunks)
        moved = ", ".join(f"{names[g.src]} → {names[g.dst]}: {g.chunks}" for g in e.transfers
                          if g.src != g.dst and g.chunks)
        workers = ", ".join(f"{names[r]} ×{y}" for r, y in enumerate(e.workers) if y)
        table.add_row(str(e.slot), e.job, workers, names[e.ps_site], local or "-", moved or "-")
    return table


def run_table(run: SitesRun) -> Table:
    """Per (job, slot): where it ran, what it trained and its accuracy; moves flagged."""
    table = Table(title="real run (digits CNN, synchronous PS): validation accuracy before "
                        "the slot, of the restored checkpoint, and after the slot")
    for col in ("slot", "job", "PS", "workers", "chunks", "before", "restored", "after",
                "moved"):
        table.add_column(col, justify="left" if col in ("job", "PS", "workers", "moved")
                         else "right")
    for r in run.records:
        moved = ("PS + workers" if r.ps_moved else "workers") if r.migrated else "-"
        restored = "-" if r.restored_accuracy is None else f"{r.restored_accuracy:.3f}"
        before = "-" if r.accuracy_before != r.accuracy_before else f"{r.accuracy_before:.3f}"
        table.add_row(str(r.slot), r.job, r.ps_site,
                      ", ".join(f"{s} ×{y}" for s, y in r.workers.items()), str(r.chunks),
                      before, restored, f"{r.val_accuracy:.3f}", moved)
    return table


def sim_json(problem: SitesProblem, results: list[SimResult]) -> dict[str, Any]:
    """Each policy's cost (latency + bandwidth), makespan and completions; wall-clock
    figures under ``timings``."""
    return {"sites": problem.n_sites, "jobs": len(problem.jobs), "horizon": problem.horizon,
            "results": [{"policy": r.policy, "total_cost": r.total_cost,
                         "latency": r.cost.latency, "data_transfer": r.cost.data_transfer,
                         "parameter_exchange": r.cost.parameter_exchange,
                         "makespan": r.makespan, "slots_run": r.slots_run,
                         "completion": r.completion, "unfinished": list(r.unfinished),
                         "timings": dict(r.timings)} for r in results]}


def plan_json(problem: SitesProblem, plan: Plan) -> dict[str, Any]:
    """The per-slot schedule with site names: workers per site, PS site, chunk transfers."""
    names = [s.name for s in problem.sites]
    return {"policy": plan.policy, "completion": plan.completion, "entries": [
        {"slot": e.slot, "job": e.job, "ps_site": names[e.ps_site],
         "workers": {names[r]: y for r, y in enumerate(e.workers) if y},
         "transfers": [{"src": names[g.src], "dst": names[g.dst], "chunks": g.chunks}
                       for g in e.transfers if g.chunks]} for e in plan.entries]}


def run_json(run: SitesRun) -> dict[str, Any]:
    """A real run: accuracy per job, moves, bytes, one record per (job, slot)."""
    return {"final_accuracy": run.final_accuracy, "migrations": run.migrations,
            "ps_moves": run.ps_moves, "chunks_moved": run.chunks_moved,
            "data_bytes_moved": run.data_bytes_moved,
            "checkpoint_bytes_moved": run.checkpoint_bytes_moved,
            "untrained_chunks": run.untrained_chunks,
            "records": [{"slot": r.slot, "job": r.job, "ps_site": r.ps_site,
                         "workers": r.workers, "chunks": r.chunks, "samples": r.samples,
                         "val_accuracy": r.val_accuracy,
                         "restored_accuracy": r.restored_accuracy, "migrated": r.migrated,
                         "ps_moved": r.ps_moved} for r in run.records],
            "timings": {"seconds": run.seconds}}


def _plot(problem: SitesProblem, plan: Plan, path: Path) -> None:
    """A Gantt chart of the schedule: one bar per (job, slot), labelled with its PS site."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = [j.name for j in problem.jobs]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(jobs) + 1.5))
    cmap = plt.get_cmap("tab20")
    for e in plan.entries:
        ax.barh(jobs.index(e.job), 1, left=e.slot, color=cmap(e.ps_site % 20), edgecolor="k")
    ax.set_yticks(range(len(jobs)), jobs)
    ax.set_xlabel("slot (colour: PS site)")
    ax.set_title(f"{plan.policy} schedule")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise ConfigError(f"cannot write the plot: {exc.strerror}", field="--plot") from None
    finally:
        plt.close(fig)


@app.command("simulate")
@user_errors
def simulate_command(
    scenario: Scenario = None,
    policy: list[str] = typer.Option(["okita"], "--policy", "-p",
                                     help="policy to simulate (repeatable)"),
    seed: int = SeedOpt,
    sites: int = typer.Option(50, min=1, max=1000, help="generator: sites R"),
    jobs: int = typer.Option(100, min=1, max=10_000, help="generator: jobs I"),
    horizon: int = typer.Option(150, min=1, max=10_000, help="generator: slots T"),
    plot: Path | None = typer.Option(None, help="save the first policy's schedule as a PNG"),
    as_json: AsJson = False,
) -> None:
    """Simulate policies slot by slot; print total cost (latency + bandwidth) and makespan."""
    problem = _scenario(scenario, seed, sites, jobs, horizon)
    results = []
    for p in policy:
        with stage(f"simulating {p} over {problem.horizon} slots"):
            results.append(simulate(problem, p, seed=seed))
    if as_json:
        print(json.dumps(sim_json(problem, results)))
    else:
        print_fitted(sim_table(problem, results), out)
    if plot is not None:
        _plot(problem, results[0].plan, plot)
        err.print(f"schedule plot saved to {plot}")


@app.command("plan")
@user_errors
def plan_command(scenario: Scenario = None, policy: str = PolicyOpt, seed: int = SeedOpt,
                 sites: int = typer.Option(5, min=1, max=1000, help="generator: sites R"),
                 jobs: int = typer.Option(4, min=1, max=10_000, help="generator: jobs I"),
                 horizon: int = typer.Option(20, min=1, max=10_000, help="generator: T"),
                 as_json: AsJson = False) -> None:
    """Print a policy's per-slot schedule: workers and PS per site, chunks trained and moved."""
    problem = _scenario(scenario, seed, sites, jobs, horizon)
    plan = plan_schedule(problem, policy, seed=seed)
    if as_json:
        print(json.dumps(plan_json(problem, plan)))
        return
    print_fitted(plan_table(problem, plan), out)


def run_scenario(problem: SitesProblem, policy: str, seed: int,
                 epochs_per_slot: int | None = None, cluster: Cluster | None = None,
                 as_json: bool = False, address: str | None = None) -> SitesRun:
    """Plan with ``policy``, print the schedule, run it for real (emulated, or on the Ray
    cluster at ``address``) with a progress bar and print per-slot accuracy and the moves
    (``as_json``: one JSON object, nothing else)."""
    plan = plan_schedule(problem, policy, seed=seed)
    if not as_json:
        print_fitted(plan_table(problem, plan), out)
    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err)
    task = bars.add_task("chunks trained", total=sum(e.chunks for e in plan.entries))

    def events(kind: str, data: dict[str, Any]) -> None:
        if kind == "job_slot":
            bars.advance(task, data["record"].chunks)
        elif kind == "slot_start":
            bars.update(task, description=f"slot {data['slot'] + 1}/{data['n_slots']}")
            if not err.is_terminal:  # the bar draws nothing in a log: a plain line instead
                err.print(f"slot {data['slot'] + 1} of {data['n_slots']} starts",
                          highlight=False)

    config = SiteRunConfig(seed=seed, epochs_per_slot=epochs_per_slot)
    with bars:
        run = _execute(problem, plan, config, cluster, events, address)
    if as_json:
        print(json.dumps({"plan": plan_json(problem, plan), "run": run_json(run)}))
        return run
    print_fitted(run_table(run), out)
    accuracy = ", ".join(f"{j} {a:.3f}" for j, a in run.final_accuracy.items())
    out.print(f"[bold]final validation accuracy[/]: {accuracy}; migrations {run.migrations} "
              f"(PS moves {run.ps_moves}); {run.chunks_moved} chunks moved between sites "
              f"({run.data_bytes_moved:,} B), checkpoints moved {run.checkpoint_bytes_moved:,} B")
    return run


def _execute(problem: SitesProblem, plan: Plan, config: SiteRunConfig, cluster: Cluster | None,
             events: Any, address: str | None) -> SitesRun:
    if not address:
        return execute_emulated(problem, plan, config=config, cluster=cluster, events=events)
    runtime = connect(cluster or emulated_cluster(problem, plan, config), address)
    try:
        return execute(runtime, problem, plan, config=config, events=events)
    finally:
        runtime.shutdown()


@app.command("run")
@user_errors
def run_command(scenario: Scenario = None, policy: str = PolicyOpt, seed: int = SeedOpt,
                epochs_per_slot: int = typer.Option(0, min=0, max=100,
                                                    help="epochs per slot (0: each job's E_i)"),
                cluster: Path | None = typer.Option(
                    None, help="cluster YAML whose sites (by name) host the run; default: "
                               "emulated servers sized to the plan"),
                address: str = Address, as_json: AsJson = False) -> None:
    """Plan with POLICY and carry the plan out on the sites (emulated, or the cluster at
    --address; Ray, digits CNN): chunks shipped over inter-site links, PS and workers moved
    between slots from checkpoints."""
    problem = real_problem() if scenario is None else load_scenario(scenario)
    devices = None if cluster is None else load_cluster(cluster)
    run_scenario(problem, policy, seed, epochs_per_slot or None, devices, as_json, address)


def demo_part() -> SitesRun:
    """`edgewise demo`'s Okita part (under a minute): a one-job scenario over three sites
    planned by Okita and run for real; a worker moves to another site between the slots."""
    run = run_scenario(demo_problem(), "okita", 0)
    if run.migrations < 1:
        err.print("[yellow]the plan did not move the job this time[/]")
    return run
