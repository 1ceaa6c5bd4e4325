"""The bench's figures (Figs. 4–8 of SROLE) as PNG files, drawn with matplotlib's Agg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["save_plots"]

METHODS = ("rl", "marl", "srole-c", "srole-d")


def _jct(result: dict[str, Any], path: Path) -> Path:
    jct = result["jct_s"]
    models = [m for m in jct if m != "edges"]
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.2))
    for ax, model in zip(axes, models, strict=True):
        for name in METHODS:
            ax.plot(jct["edges"], jct[model][name], marker="o", label=name)
        ax.set(title=model, xlabel="number of edges", ylabel="JCT (s)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _bars(result: dict[str, Any], path: Path, key: str, ylabel: str) -> Path:
    load = result["load"]
    fig, axes = plt.subplots(1, len(load), figsize=(4 * len(load), 3.2))
    for ax, (model, per) in zip(axes, load.items(), strict=True):
        workloads = list(per["marl"])
        for k, name in enumerate(METHODS):
            xs = [i + 0.2 * k for i in range(len(workloads))]
            ax.bar(xs, [per[name][w][key] for w in workloads], width=0.2, label=name)
        ax.set_xticks([i + 0.3 for i in range(len(workloads))], [f"{w}%" for w in workloads])
        ax.set(title=model, xlabel="workload", ylabel=ylabel)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _overhead(result: dict[str, Any], path: Path) -> Path:
    over = result["overhead"]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(METHODS, [over[n]["decision_ops"] for n in METHODS], label="scheduling")
    ax.bar(METHODS, [over[n]["shield_ops"] for n in METHODS],
           bottom=[over[n]["decision_ops"] for n in METHODS], label="shielding")
    ax.set(ylabel="work per round (look-ups + checks)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _kappa(result: dict[str, Any], path: Path) -> Path:
    col = result["collisions_vs_kappa"]
    kappas = list(col)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name in METHODS:
        ax.plot([-float(k) for k in kappas], [col[k][name]["collisions"] for k in kappas],
                marker="o", label=name)
    ax.set(xlabel="reward of an unsafe action (−κ)", ylabel="action collisions per round")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def save_plots(result: dict[str, Any], plots_dir: Path) -> list[Path]:
    """Write jct.png, tasks.png, utilisation.png, overhead.png and collisions.png."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    return [_jct(result, plots_dir / "jct.png"),
            _bars(result, plots_dir / "tasks.png", "tasks_median", "tasks per device (median)"),
            _bars(result, plots_dir / "utilisation.png", "cpu_util_median",
                  "CPU utilisation (median)"),
            _overhead(result, plots_dir / "overhead.png"),
            _kappa(result, plots_dir / "collisions.png")]
