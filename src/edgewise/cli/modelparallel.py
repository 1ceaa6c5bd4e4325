"""`edgewise modelparallel ...`: pre-train SROLE's agents, place a job, compare the methods."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer
from rich.table import Table

from edgewise.cli.common import err, out, state_dir, user_errors
from edgewise.errors import ConfigError
from edgewise.modelparallel.agents import QAgent, load_agents, save_agents
from edgewise.modelparallel.bench import METHOD_NAMES
from edgewise.modelparallel.jobs import check_model
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.sim import KAPPA, RoundResult, play_round, pretrain, random_round

__all__ = ["app", "demo_part", "placement_table", "results_table"]

app = typer.Typer(help="Model-parallel training placement on edge clusters (SROLE): "
                       "per-node RL agents with shields.", no_args_is_help=True)

MethodOpt = typer.Option("srole-c", "--method", "-m", help="rl, marl, srole-c or srole-d")
ModelOpt = typer.Option("vgg-16", help="vgg-16, googlenet or rnn")
SeedOpt = typer.Option(0, help="random seed (same seed, same numbers)")
EdgesOpt = typer.Option(10, min=5, max=100, help="edge nodes (a multiple of 5)")
WorkloadOpt = typer.Option(100.0, min=50.0, max=100.0, help="PageRank workload, %")
RoundsOpt = typer.Option(600, min=1, max=100_000, help="offline pre-training rounds")
PartsOpt = typer.Option(None, "--partitions", min=1, max=64,
                        help="group each model's levels into at most this many FLOP-balanced "
                             "partitions (default: one partition per model level, §III)")


def _agents_path(method: str) -> Path:
    return state_dir() / "srole" / f"{method}.json"


def _trained(method: str, agents: Path | None, rounds: int, seed: int,
             parts: int | None = None) -> QAgent:
    """The saved agent for ``method`` (``agents`` or the state directory), else pre-train."""
    get_method(method)  # an unknown method is reported before anything is read or trained
    path = agents or _agents_path(method)
    if path.exists():
        saved, loaded = load_agents(path)
        if saved != method:
            raise ConfigError(f"{path} holds agents of {saved!r}, not {method!r}",
                              field="--agents")
        return loaded[0]
    if agents is not None:
        raise ConfigError(f"no such file: {agents}", field="--agents")
    err.print(f"no saved agents for {method}; pre-training {rounds} rounds")
    return pretrain(get_method(method), srole_models(), np.random.default_rng(seed), rounds,
                    n_partitions=parts)


@app.command("train")
@user_errors
def train_command(
    method: str = MethodOpt, rounds: int = RoundsOpt, seed: int = SeedOpt,
    kappa: float = typer.Option(KAPPA, min=0.0, help="shield penalty κ"),
    output: Path | None = typer.Option(None, "--out", help="JSON file (default: state dir)"),
    parts: int | None = PartsOpt,
) -> None:
    """Pre-train a method's agents offline on random networks (§V-A) and save them."""
    agent = pretrain(get_method(method), srole_models(), np.random.default_rng(seed), rounds,
                     kappa=kappa, n_partitions=parts)
    path = output or _agents_path(method)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_agents(path, method, [agent])
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror}", field="--out") from None
    out.print(f"{method}: {len(agent.q)} states learned in {rounds} rounds, saved to {path}")


def placement_table(res: RoundResult, jobs: list[str], method: str) -> Table:
    """One row per job: its partitions' proposed and executed hosts and its JCT."""
    table = Table(title=f"{method} placement")
    for col in ("job", "proposed hosts", "executed hosts", "JCT (s)"):
        table.add_column(col)
    for name, p, e, t in zip(jobs, res.proposed, res.executed, res.jct_s, strict=True):
        table.add_row(name, " ".join(map(str, p.nodes)), " ".join(map(str, e.nodes)),
                      f"{t:.1f}")
    return table


@app.command("place")
@user_errors
def place_command(method: str = MethodOpt, model: str = ModelOpt, edges: int = EdgesOpt,
                  workload: float = WorkloadOpt, seed: int = SeedOpt, rounds: int = RoundsOpt,
                  agents: Path | None = typer.Option(None, help="agents saved by `train`"),
                  parts: int | None = PartsOpt) -> None:
    """Place one round of jobs (3 per cluster) on a random Table I network and print it."""
    check_model(model)
    base = _trained(method, agents, rounds, seed, parts)
    rng = np.random.default_rng([seed, 1])
    net = random_network(edges, rng)
    rnd = random_round(net, model, workload, rng, parts)
    res = play_round(get_method(method), rnd, [base.copy() for _ in range(net.n)], rng,
                     explore=False, learn=False)
    out.print(placement_table(res, [f"{j.name} (node {j.origin})" for j in rnd.jobs], method))
    out.print(f"collisions proposed {res.collisions}, after shielding {res.collisions_after}; "
              f"shield moved {res.corrected} partitions")


def results_table(rows: dict[str, list[RoundResult]]) -> Table:
    """Per method: mean JCT, collisions, overloaded nodes, decision and shield work."""
    table = Table(title="SROLE methods (means per round)")
    for col in ("method", "JCT s", "coll. prop.", "coll. exec.", "overloaded", "decide ops",
                "shield ops"):
        table.add_column(col, justify="right")
    for name, res in rows.items():
        table.add_row(name, f"{np.mean([x for r in res for x in r.jct_s]):.1f}",
                      *(f"{np.mean([getattr(r, a) for r in res]):.2f}" for a in (
                          "collisions", "collisions_after", "overloaded_after", "decision_ops",
                          "shield_ops")))
    return table


def _simulate(methods: list[str], model: str, edges: int, workload: float, online: int,
              rounds: int, seed: int,
              parts: int | None = None) -> dict[str, list[RoundResult]]:
    rows = {}
    for name in methods:
        method = get_method(name)
        base = pretrain(method, srole_models(), np.random.default_rng(seed), rounds,
                        n_partitions=parts)
        gen = np.random.default_rng([seed, 1])
        net = random_network(edges, gen)
        agents = [base.copy() for _ in range(net.n)]
        act = np.random.default_rng([seed, 2])
        rows[name] = [play_round(method, random_round(net, model, workload, gen, parts),
                                 agents, act) for _ in range(online)]
    return rows


@app.command("simulate")
@user_errors
def simulate_command(
    method: list[str] = typer.Option(list(METHOD_NAMES), "--method", "-m",
                                     help="method to compare (repeatable)"),
    model: str = ModelOpt, edges: int = EdgesOpt, workload: float = WorkloadOpt,
    online: int = typer.Option(40, min=1, max=10_000, help="online rounds"),
    rounds: int = RoundsOpt, seed: int = SeedOpt, parts: int | None = PartsOpt) -> None:
    """Pre-train each method, then run it online on the same random network and rounds."""
    check_model(model)
    for name in method:
        get_method(name)
    out.print(results_table(_simulate(method, model, edges, workload, online, rounds, seed,
                                      parts)))


def demo_part() -> None:
    """`edgewise demo`'s SROLE part (well under 45 s): the four methods pre-trained briefly
    and compared on a 10-node, 2-cluster network training VGG-16 at 100 % workload."""
    out.print(results_table(_simulate(list(METHOD_NAMES), "vgg-16", 10, 100.0, 20, 200, 0)))
