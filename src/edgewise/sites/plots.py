"""Figures of the Okita benchmark: Fig. 7-12 and 14 of the paper (the kit's driver picks the
matplotlib backend; Fig. 13, running time, is a wall-clock figure and stays in ``timings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

__all__ = ["plots"]


def _lines(ax: Any, table: dict[Any, dict[str, float]], xlabel: str) -> None:
    xs = sorted(table)
    for policy in next(iter(table.values())):
        ax.plot(xs, [table[x][policy] for x in xs], marker="o", label=policy)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("total cost")
    ax.set_yscale("log")
    ax.legend()


def _grouped(ax: Any, table: dict[str, dict[str, float]]) -> None:
    groups = list(table)
    policies = list(next(iter(table.values())))
    width = 0.8 / len(policies)
    for k, policy in enumerate(policies):
        ax.bar([g + k * width for g in range(len(groups))],
               [table[name][policy] for name in groups], width, label=policy)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups)
    ax.set_ylabel("total cost")
    ax.set_yscale("log")
    ax.legend()


def _bars(ax: Any, values: dict[str, float], xlabel: str, ylabel: str) -> None:
    ax.bar(list(values), list(values.values()))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def plots(report: dict[str, Any], out: Path) -> dict[str, Any]:
    """One PNG per figure under ``out`` (Fig. 13's running time from ``report["timings"]``,
    which the kit passes to plots); ``{"plots": [their paths]}``."""
    out.mkdir(parents=True, exist_ok=True)
    ratio = report["performance_ratio"]
    kinds = report["latency_functions"]
    figures: dict[str, Any] = {
        "cost_vs_sites": lambda ax: _lines(ax, report["cost_vs_sites"], "sites R"),
        "cost_vs_jobs": lambda ax: _lines(ax, report["cost_vs_jobs"], "jobs I"),
        "alpha": lambda ax: _bars(ax, report["alpha"], "α1:α2", "okita total cost"),
        "beta": lambda ax: _bars(ax, report["beta"], "β1,β2,β3", "okita total cost"),
        "runtime": lambda ax: _bars(  # Fig. 13: wall-clock, from the kit's timings
            ax, {str(k): v for k, v in report["timings"]["runtime_vs_jobs"].items()},
            "jobs I", "okita running time (s, wall-clock)"),
        "performance_ratio": lambda ax: _bars(ax, ratio["mean"], "policy",
                                              "mean cost / offline optimum"),
        "latency_functions": lambda ax: _grouped(ax, kinds),
    }
    paths = []
    for name, draw in figures.items():
        fig, ax = plt.subplots(figsize=(5, 3.5))
        draw(ax)
        fig.tight_layout()
        path = out / f"okita_{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(str(path))
    return {"plots": paths}
