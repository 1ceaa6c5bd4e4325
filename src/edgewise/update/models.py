"""The performance models an update plan uses: the calibrated ones, or models learned from a
profile and saved under a plain name (``edgewise update fit ... --models NAME``); the
command line and the manager load them alike."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from edgewise.errors import ConfigError
from edgewise.perf.calibrated import calibrated
from edgewise.perf.models import load as load_learned
from edgewise.perf.schema import PerfModel

__all__ = ["CALIBRATED", "NAME_PATTERN", "load_models"]

CALIBRATED = "calibrated"
"""The name of the calibrated performance models (the others are fitted and named)."""

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""A plain name (models directory, profile, profile id): no dots, no slashes, no traversal."""


def load_models(models_dir: Path, name: str, device_types: Iterable[str]) -> dict[str, PerfModel]:
    """One performance model per device type: calibrated, or learned from
    ``models_dir/name/<device_type>``; ConfigError for an unknown type or a missing model."""
    types = sorted(set(device_types))
    if name == CALIBRATED:
        try:
            return {t: calibrated(t) for t in types}
        except KeyError as exc:
            raise ConfigError(str(exc.args[0]), field="device_type") from None
    root = (models_dir / name).resolve()
    # Names are plain (NAME_PATTERN); this also refuses a symlink that leads elsewhere.
    if not root.is_relative_to(models_dir.resolve()) or not root.is_dir():
        raise ConfigError(f"no models directory {name!r} on the server", field="models")
    models: dict[str, PerfModel] = {}
    for t in types:
        if not (root / t).is_dir():
            raise ConfigError(f"models {name!r} have none for device type {t!r}", field="models")
        models[t] = load_learned(root / t, t)
    return models

