"""Plots of ``edgewise bench ekya --sweep``: the gain by stream count and against the share per
stream, its maximum against the cost scale, the heat map, and the JSON grid beside them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edgewise.continual.figfile import save_figure

__all__ = ["save_sweep"]

_STYLE = {"protocol": "-", "checkpoints_served": ":", "checkpoint_aware": "--"}
_COLOUR = {"1": "tab:blue", "2": "tab:orange"}


def save_sweep(figures: Mapping[str, Any], folder: Path) -> list[Path]:
    """Write ekya-sweep.json (the grid), ekya-sweep-streams.png, ekya-sweep-cost-scale.png
    and ekya-sweep-heatmap.png into ``folder``."""
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    grid = folder / "ekya-sweep.json"
    grid.write_text(json.dumps(figures["sweep"], indent=1))
    study = figures["sweep"]
    return [grid, *(save_figure(draw(study, plt), folder / name, plt) for name, draw in (
        ("ekya-sweep-streams.png", _streams), ("ekya-sweep-cost-scale.png", _cost_scale),
        ("ekya-sweep-heatmap.png", _heatmap)))]


def _thresholds(ax: Any, study: Mapping[str, Any]) -> None:
    for g, gain in study["paper_gains"].items():
        ax.axhline(gain, color=_COLOUR[g], lw=0.8, alpha=0.6)


def _streams(study: Mapping[str, Any], plt: Any) -> Any:
    """At the default cost scale: relative gain and points by stream count, and the relative
    gain against the accelerator share per stream (both accelerator counts on one axis)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    at_default = f"{study['defaults']['cost_scale']:g}"
    for variant, scales in study["by_cost_scale"].items():
        for g, row in scales[at_default].items():
            kw = {"ls": _STYLE[variant], "color": _COLOUR[g], "marker": "o", "ms": 3,
                  "label": f"{g} acc., {variant}"}
            axes[0].plot(study["stream_counts"], row["relative"], **kw)
            axes[1].plot(study["stream_counts"], row["points"], **kw)
            axes[2].plot(row["share_per_stream"], row["relative"], **kw)
    for ax, (x, y) in zip(axes, (("video streams", "relative gain over best uniform"),
                                 ("video streams", "gain in accuracy points"),
                                 ("accelerators per stream (G/N)", "relative gain")),
                          strict=True):
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
    _thresholds(axes[0], study)
    _thresholds(axes[2], study)
    axes[2].set_xscale("log", base=2)
    axes[0].legend(fontsize=6)
    axes[0].set_title("gain by streams (lines: paper's 29% / 23%)")
    axes[1].set_title("the same in accuracy points")
    axes[2].set_title("gain vs accelerator share per stream")
    return fig


def _cost_scale(study: Mapping[str, Any], plt: Any) -> Any:
    """The paper's reading (maximum over stream counts) against the cost scale."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    scales = study["cost_scales"]
    for variant, by_scale in study["by_cost_scale"].items():
        for g in study["paper_gains"]:
            kw = {"ls": _STYLE[variant], "color": _COLOUR[g], "marker": "o", "ms": 3,
                  "label": f"{g} acc., {variant}"}
            axes[0].plot(scales, [by_scale[f"{s:g}"][g]["max_relative"] for s in scales], **kw)
            axes[1].plot(scales, [by_scale[f"{s:g}"][g]["max_points"] for s in scales], **kw)
    _thresholds(axes[0], study)
    for ax, label in zip(axes, ("max over streams, relative", "max over streams, points"),
                         strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("retraining cost scale (1 = recorded trace)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.axvline(study["defaults"]["cost_scale"], color="grey", lw=0.8)
    axes[0].legend(fontsize=6)
    axes[0].set_title("§6.2's reading vs the trace's cost scale")
    return fig


def _heatmap(study: Mapping[str, Any], plt: Any) -> Any:
    """Relative gain at the stressed stream count over share per stream × cost scale."""
    hm = study["heatmap"]
    variants = list(hm["relative"])
    fig, axes = plt.subplots(1, len(variants), figsize=(6 * len(variants), 3.8),
                             squeeze=False)
    for ax, variant in zip(axes[0], variants, strict=True):
        values = hm["relative"][variant]
        image = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(hm["shares_per_stream"])),
                      [f"{s:g}" for s in hm["shares_per_stream"]])
        ax.set_yticks(range(len(hm["cost_scales"])), [f"{s:g}" for s in hm["cost_scales"]])
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                mark = "*" if v >= max(study["paper_gains"].values()) else ""
                ax.text(j, i, f"{v:.2f}{mark}", ha="center", va="center", fontsize=7,
                        color="white" if v < max(map(max, values)) * 0.6 else "black")
        ax.set_xlabel(f"accelerators per stream ({hm['streams']} streams)")
        ax.set_ylabel("retraining cost scale")
        ax.set_title(f"relative gain, {variant} (*: ≥ the paper's 29%)")
        fig.colorbar(image, ax=ax)
    return fig

