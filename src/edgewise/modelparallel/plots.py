"""The bench's figures (Figs. 4–8 of SROLE) as PNG files (the kit's driver picks the
backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

__all__ = ["plots"]

METHODS = ("rl", "marl", "iql", "srole-c", "srole-d")


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
            xs = [i + 0.16 * k for i in range(len(workloads))]
            ax.bar(xs, [per[name][w][key] for w in workloads], width=0.16, label=name)
        ax.set_xticks([i + 0.32 for i in range(len(workloads))], [f"{w}%" for w in workloads])
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


PAPER_LOW = {"jct_reduction_srole_c_vs_marl": 0.49, "jct_reduction_srole_d_vs_marl": 0.36,
             "jct_reduction_srole_c_vs_rl": 0.47}
"""The low end of the paper's JCT reductions (§V-D): SROLE-C 49–59 %, SROLE-D 36–45 %."""


def _sweep(sweep: dict[str, Any], path: Path) -> Path:
    """One heat map per headline reduction: rows the overload models, columns the
    intensities; a black frame where the cell reaches the paper's range."""
    from matplotlib.patches import Rectangle

    keys = [k for k in PAPER_LOW if k in sweep["grid"]]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys) + 1.6, 3.4), sharey=True)
    for ax, key in zip(axes, keys, strict=True):
        grid = sweep["grid"][key]
        image = ax.imshow(grid, cmap="RdYlGn", vmin=-0.6, vmax=0.6, aspect="auto")
        for r, row in enumerate(grid):
            for c, value in enumerate(row):
                ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=9)
                if value >= PAPER_LOW[key]:
                    ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, lw=2))
        ax.set_xticks(range(len(sweep["intensities"])),
                      [f"×{x:g}" for x in sweep["intensities"]])
        ax.set_yticks(range(len(sweep["overload_models"])), sweep["overload_models"])
        ax.set(title=f"{key.removeprefix('jct_reduction_').replace('_', ' ')} "
                     f"(paper ≥ {PAPER_LOW[key]:.2f})", xlabel="background intensity")
    fig.colorbar(image, ax=list(axes), label="JCT reduction")
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def plots(figures: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write jct.png, tasks.png, utilisation.png, overhead.png and collisions.png into
    ``folder`` (with ``--sweep``: sweep.png); ``{"plots": [their paths]}``."""
    folder.mkdir(parents=True, exist_ok=True)
    if "sweep" in figures:
        return {"plots": [str(_sweep(figures["sweep"], folder / "sweep.png"))]}
    made = [_jct(figures, folder / "jct.png"),
            _bars(figures, folder / "tasks.png", "tasks_median", "tasks per device (median)"),
            _bars(figures, folder / "utilisation.png", "cpu_util_median",
                  "CPU utilisation (median)"),
            _overhead(figures, folder / "overhead.png"),
            _kappa(figures, folder / "collisions.png")]
    return {"plots": [str(p) for p in made]}
