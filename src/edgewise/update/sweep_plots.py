"""The sweep's outputs: its grid as JSON, and one heat map per way of planning (true models,
learned models) with the region where the mean speedup reaches the headline outlined."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgewise.bench import Figures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.patches import Rectangle

__all__ = ["sweep_plots"]

_KINDS = {"perfect": ("speedup_perfect_model_mean", "planned with the true models"),
          "learned": ("speedup_mean", "planned with learned models")}


def _values(grid: list[Figures], key: str) -> dict[tuple[float, ...], float]:
    return {(c["cpu_slowdown"], c["fair_batch"], c["sift_base_ms_nano"],
             c["sift_weight_scale"], c["gpu_slowdown"]): np.nan if c[key] is None else c[key]
            for c in grid}


def _panel(ax: Axes, rows: list[tuple[float, float]], kgs: list[float],
           cell: dict[tuple[float, ...], float], headline: float, vmax: float) -> Any:
    """One (k_c, fair batch) panel: SIFT (base, weight scale) down, k_g across."""
    from matplotlib.colors import TwoSlopeNorm

    data = np.array([[cell[(b, w, g)] for g in kgs] for b, w in rows])
    norm = TwoSlopeNorm(vmin=1.0, vcenter=headline, vmax=vmax)  # white at the headline
    image = ax.imshow(data, cmap="RdBu_r", norm=norm, aspect="auto")
    for (i, j), v in np.ndenumerate(data):
        dark = not np.isnan(v) and abs(float(norm(v)) - 0.5) > 0.3
        ax.text(j, i, "—" if np.isnan(v) else f"{v:.2f}", ha="center", va="center",
                fontsize=7, color="white" if dark else "black")
        if v >= headline:
            ax.add_patch(_outline(j, i))
    ax.set_xticks(range(len(kgs)), [f"{g:.2f}" for g in kgs])
    ax.set_yticks(range(len(rows)), [f"{b:g} ms ×{w:g}" for b, w in rows])
    return image


def _outline(x: int, y: int) -> Rectangle:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.0)


def _heat_map(figures: Figures, kind: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    key, how = _KINDS[kind]
    axes, headline = figures["sweep"]["axes"], figures["sweep"]["headline"]
    values = _values(figures["grid"], key)
    rows = [(b, w) for b in axes["sift_base_ms_nano"] for w in axes["sift_weight_scale"]]
    kcs, batches, kgs = axes["cpu_slowdown"], axes["fair_batch"], axes["gpu_slowdown"]
    finite = [v for v in values.values() if not np.isnan(v)]
    vmax = max([headline + 0.1, *finite])
    fig, grid = plt.subplots(len(kcs), len(batches), squeeze=False, sharex=True, sharey=True,
                             layout="constrained",
                             figsize=(3.0 * len(batches) + 2.0,
                                      max(3.0, 0.4 * len(rows) * len(kcs) + 1.6)))
    image = None
    for (r, kc), (c, batch) in itertools.product(enumerate(kcs), enumerate(batches)):
        ax = grid[r][c]
        cell = {k[2:]: v for k, v in values.items() if k[0] == kc and k[1] == batch}
        image = _panel(ax, rows, kgs, cell, headline, vmax)
        ax.set_title(f"k_c {kc:.2f}, fair at batch {batch}", fontsize=8)
        if r == len(kcs) - 1:
            ax.set_xlabel("k_g (GPU slope)")
        if c == 0:
            ax.set_ylabel("Nano SIFT base, weights")
    assert image is not None
    fig.colorbar(image, ax=grid, shrink=0.6, label="mean speedup of deep-edge over fair")
    fig.suptitle(f"Deep-Edge §V-C, {how}: outlined, mean speedup ≥ {headline}\n"
                 f"({figures['sweep']['experiments_per_cell']} experiments per cell; "
                 f"— where fair found no plan)", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_plots(figures: Figures, folder: Path) -> Figures:
    """Write ``deep-edge-sweep.json`` (the figures, grid included) and the two heat maps."""
    folder.mkdir(parents=True, exist_ok=True)
    grid_path = folder / "deep-edge-sweep.json"
    grid_path.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    out: Figures = {"sweep_grid_json": str(grid_path)}
    for kind in _KINDS:
        path = folder / f"deep-edge-sweep-{kind}.png"
        _heat_map(figures, kind, path)
        out[f"sweep_heatmap_{kind}_png"] = str(path)
    return out
