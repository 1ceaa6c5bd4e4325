"""Which performance models plan a workload's update: those fitted for it, where they
exist, else the digits calibration, said in one line with what that costs."""

from __future__ import annotations

import re
from pathlib import Path

from edgewise.cluster.model import Cluster, Role
from edgewise.nn.workload import Workload
from edgewise.update import CALIBRATED

__all__ = ["models_name", "planning_models"]


def models_name(workload: Workload, path: Path) -> str:
    """The name a workload's fitted models go by: its ``name``, else its file's stem, as a
    plain name (`update fit --models NAME`)."""
    raw = workload.name or path.stem
    return re.sub(r"[^A-Za-z0-9_-]", "-", raw)[:64] or "workload"


def planning_models(workload: Workload | None, path: Path | None, chosen: str,
                    cluster: Cluster, models_dir: Path) -> tuple[str, str | None]:
    """The models that plan (``chosen`` when the user named some) and a line to print, or
    None. With a workload and no ``--models``: the models fitted under its name for every
    worker type where they all exist, else the calibration, and why that matters."""
    if workload is None or path is None or chosen != CALIBRATED:
        return chosen, None
    name = models_name(workload, path)
    types = sorted({d.type for d in cluster.with_role(Role.WORKER)})
    missing = [t for t in types if not (models_dir / name / t).is_dir()]
    if not missing:
        return name, f"planning with the models fitted for this workload ({name!r})"
    return CALIBRATED, (
        f"planning with the digits calibration: no models fitted for {name!r} on "
        f"{', '.join(missing)}; the predicted epoch time and app pressure are the digits "
        f"CNN's, not your model's, so the shards and batch sizes may not suit it (fit them: "
        f"`edgewise profile --workload {path}` on each device type, then `edgewise update "
        f"fit PROFILE --device-type TYPE --models {name}`)")
