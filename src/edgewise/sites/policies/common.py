"""Helpers shared by the Okita policies: resource ledgers and turning a deployment into a
JobSlot (DTA, Alg. 3, then idle workers dropped)."""

from __future__ import annotations

import numpy as np

from edgewise.sites.placement import Geometry, dta, site_capacity, trim
from edgewise.sites.problem import Job, JobSlot

__all__ = ["charge", "emit", "fits"]


def fits(job: Job, avail: np.ndarray, workers: np.ndarray, ps_site: int) -> bool:
    """Whether y workers and the PS fit in the available resources (2d)."""
    need = np.outer(workers, job.worker_demand)
    need[ps_site] += job.ps_demand
    return bool((need <= avail + 1e-9).all())


def charge(job: Job, avail: np.ndarray, workers: np.ndarray, ps_site: int) -> None:
    """Subtract y workers and the PS from ``avail`` in place (Alg. 1 line 24)."""
    avail -= np.outer(workers, job.worker_demand)
    avail[ps_site] -= job.ps_demand


def emit(geo: Geometry, job: Job, slot: int, remaining: np.ndarray, workers: np.ndarray,
         ps_site: int, target: np.ndarray | None = None) -> JobSlot | None:
    """Alg. 1 lines 22-23: d_i^r(t) from the workers (or ``target``), DTA for the transfers,
    then only the workers that train something stay; None if nothing is trained."""
    wanted = site_capacity(job, workers) if target is None else target
    _, moves = dta(geo, job, remaining, np.minimum(wanted, site_capacity(job, workers)))
    kept = trim(job, workers, moves)
    if kept.sum() == 0:
        return None
    return JobSlot(job.name, slot, tuple(int(v) for v in kept), int(ps_site), tuple(moves))
