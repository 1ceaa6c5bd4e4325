"""PNG figures of the Ekya bench: Figures 6, 7, 8 and 10 (the sweep's: ``sweep_plots``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from edgewise.continual.figfile import save_figure

__all__ = ["plots", "save_figure", "save_plots"]


def _lines(ax: Any, xs: Sequence[float], series: Mapping[str, Sequence[float]]) -> None:
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", lw=2.5 if name == "thief" else 1.2, label=name)
    ax.set_ylabel("mean inference accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plots(figures: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The kit's plots part: the headline's four figures (key ``plots``), or with
    ``--sweep`` the sensitivity study's plots and its JSON grid (key ``sweep_files``)."""
    if "sweep" in figures:
        from edgewise.continual.sweep_plots import save_sweep

        return {"sweep_files": [str(p) for p in save_sweep(figures, folder)]}
    return {"plots": [str(p) for p in save_plots(figures, folder)]}


def save_plots(result: Mapping[str, Any], directory: Path) -> list[Path]:
    """Write ekya-streams.png, ekya-accelerators.png, ekya-factors.png, ekya-delta.png
    (matplotlib's backend is the bench driver's)."""
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    return [save_figure(draw(result, plt), directory / name, plt) for name, draw in (
        ("ekya-streams.png", _streams), ("ekya-accelerators.png", _accelerators),
        ("ekya-factors.png", _factors), ("ekya-delta.png", _delta))]


def _streams(result: Mapping[str, Any], plt: Any) -> Any:
    sweep = result["streams_sweep"]
    fig, axes = plt.subplots(1, len(sweep), figsize=(5 * len(sweep), 3.6), squeeze=False)
    for ax, (g, series) in zip(axes[0], sweep.items(), strict=True):
        _lines(ax, result["stream_counts"], series)
        ax.set_xlabel("video streams")
        ax.set_title(f"Figure 6: {g} accelerator(s)")
    return fig


def _accelerators(result: Mapping[str, Any], plt: Any) -> Any:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    acc = result["accelerator_sweep"]
    grid = [float(g) for g in next(iter(acc.values()))]
    _lines(ax, grid, {k: list(v.values()) for k, v in acc.items()})
    ax.set_xscale("log", base=2)
    ax.set_xlabel("accelerators (10 streams)")
    ax.set_title("Figure 7")
    return fig


def _factors(result: Mapping[str, Any], plt: Any) -> Any:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    fa = result["factor_analysis"]
    names = list(next(iter(fa.values())))
    _lines(ax, [float(g) for g in fa], {n: [fa[g][n] for g in fa] for n in names})
    ax.set_xlabel("accelerators (10 streams)")
    ax.set_title("Figure 8: factor analysis")
    return fig


def _delta(result: Mapping[str, Any], plt: Any) -> Any:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ds = result["delta_sweep"]
    ax.plot(ds["delta"], ds["accuracy"], marker="o")
    ax.set_xlabel("Δ (accelerators)")
    ax.set_ylabel("mean inference accuracy")
    ax.grid(alpha=0.3)  # decision seconds per Δ are wall-clock: timings.delta_sweep_decision_s
    ax.set_title("Figure 10: Δ sensitivity (10 streams, 8 accelerators)")
    return fig


