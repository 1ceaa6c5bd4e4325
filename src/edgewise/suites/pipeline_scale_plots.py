"""The pipeline-scale bench's plot: ViT-Large's throughput against the number of devices,
one line per policy (PipeEdge's Fig. 6 axes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

__all__ = ["plots"]


def plots(figures: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write throughput-by-devices.png into ``folder``; ``{"plots": [its path]}``."""
    folder.mkdir(parents=True, exist_ok=True)
    curve = figures.get("vit_large_throughput_by_devices") or {}
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for policy, by_count in curve.items():
        counts = sorted(by_count, key=int)
        ax.plot([int(c) for c in counts], [by_count[c] for c in counts], marker="o",
                label=policy)
    ax.set(xscale="log", xlabel="devices", ylabel="results per second (steady, wall)",
           title=f"ViT-Large ({figures.get('model_scale', 'full')}), homogeneous")
    ax.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
    if curve:
        ax.legend()
    fig.tight_layout()
    path = folder / "throughput-by-devices.png"
    fig.savefig(path)
    plt.close(fig)
    return {"plots": [str(path)]}
