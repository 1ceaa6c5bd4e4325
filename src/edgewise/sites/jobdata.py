"""What each Okita job of a real run trains: its model and its data (digits by default, or
the workload its scenario entry names), checked on the driver before any actor starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgewise.errors import ConfigError
from edgewise.nn.data import Dataset, digits_split
from edgewise.nn.workload import Workload, load_workload, open_data, resolved, validate
from edgewise.sites.problem import Job, SitesProblem
from edgewise.wire.frames import encode

__all__ = ["JobData", "job_data"]


@dataclass(frozen=True, slots=True)
class JobData:
    """A job's training split (cut into its chunks), its validation frame and the workload
    its actors build (None: the run's default model on digits)."""

    train: Dataset
    validation: bytes
    workload: Workload | None


def _frame(data: Dataset) -> bytes:
    return encode({"x": data.x, "y": data.y, "ids": data.ids})


def _workload_data(job: Job, index: int, seed: int) -> JobData:
    """The job's workload, dry-run once, with its decoded splits; ConfigError naming the
    scenario's field for anything wrong with it."""
    assert job.workload is not None
    field = f"jobs[{index}].workload"
    try:
        workload = load_workload(Path(job.workload))
        done = resolved(workload, validate(workload, seed=seed))
        source = open_data(done, seed)
        train = source.read("train", np.arange(source.size("train")))
        val = source.read("val", np.arange(source.size("val")))
    except ConfigError as exc:
        inner = ": ".join(p for p in (exc.source, exc.field, exc.problem) if p)
        raise ConfigError(inner, field=field) from None
    return JobData(train, _frame(val), done)


def job_data(problem: SitesProblem, seed: int) -> dict[str, JobData]:
    """Each job's data by name; a job whose scenario entry names no workload trains on the
    digits split of ``seed`` (shared: one copy for every such job)."""
    out: dict[str, JobData] = {}
    digits: JobData | None = None
    for i, job in enumerate(problem.jobs):
        if job.workload is not None:
            out[job.name] = _workload_data(job, i, seed)
            continue
        if digits is None:
            train, val = digits_split(seed=seed)
            digits = JobData(train, _frame(val), None)
        out[job.name] = digits
    return out
