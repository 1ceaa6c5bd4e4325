"""Writing one figure of the Ekya bench (the headline's and the sweep's plots share it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_figure"]


def save_figure(fig: Any, path: Path, plt: Any) -> Path:
    """Lay out, write as PNG and close ``fig``."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
