"""What each Okita job of a real run trains: its model and its data (digits by default, or
the workload its scenario entry names, or one given already built), checked on the driver
before any actor starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgewise.errors import ConfigError
from edgewise.nn.data import Dataset, digits_split
from edgewise.nn.workload import Workload, load_workload, open_data, resolved, validate
from edgewise.sites.problem import SitesProblem
from edgewise.wire.frames import encode

__all__ = ["JobData", "checked", "checked_workloads", "job_data"]


@dataclass(frozen=True, slots=True)
class JobData:
    """A job's training split (cut into its chunks), its validation frame and the workload
    its actors build (None: the run's default model on digits)."""

    train: Dataset
    validation: bytes
    workload: Workload | None


def _frame(data: Dataset) -> bytes:
    return encode({"x": data.x, "y": data.y, "ids": data.ids})


def checked(workload: Workload, seed: int) -> tuple[Workload, int]:
    """The dry run every job's workload gets before any actor starts: ``workload`` with
    what it found filled in (so every actor builds the same network), and its training
    samples. ConfigError naming the workload's field, as :func:`validate` raises it."""
    dry = validate(workload, seed=seed)
    return resolved(workload, dry), dry.train_samples


def _named(exc: ConfigError, index: int) -> ConfigError:
    """``exc`` on the scenario's ``jobs[index].workload``, its own source and field said."""
    inner = ": ".join(p for p in (exc.source, exc.field, exc.problem) if p)
    return ConfigError(inner, field=f"jobs[{index}].workload")


def checked_workloads(problem: SitesProblem, seed: int,
                      given: Mapping[str, Workload] | None = None) -> dict[str, Workload]:
    """Each job's workload by name after its dry run (:func:`checked`): ``given``'s for a
    job named there (built already, e.g. from a manager's HTTP spec), else the file its
    scenario entry names; a job with neither is left out (the digits CNN). A workload
    several jobs are given (the same object) is dry-run once. ConfigError on
    ``jobs[i].workload`` naming the inner field."""
    given = given or {}
    done: dict[int, Workload] = {}  # by id() of a given workload
    out: dict[str, Workload] = {}
    for i, job in enumerate(problem.jobs):
        own = given.get(job.name)
        try:
            if own is not None:
                if id(own) not in done:
                    done[id(own)] = checked(own, seed)[0]
                out[job.name] = done[id(own)]
            elif job.workload is not None:
                out[job.name] = checked(load_workload(Path(job.workload)), seed)[0]
        except ConfigError as exc:
            raise _named(exc, i) from None
    return out


def _workload_data(workload: Workload, index: int, seed: int) -> JobData:
    """The checked ``workload``'s decoded splits; ConfigError on ``jobs[index].workload``."""
    try:
        source = open_data(workload, seed)
        train = source.read("train", np.arange(source.size("train")))
        val = source.read("val", np.arange(source.size("val")))
    except ConfigError as exc:
        raise _named(exc, index) from None
    return JobData(train, _frame(val), workload)


def job_data(problem: SitesProblem, seed: int,
             workloads: Mapping[str, Workload] | None = None) -> dict[str, JobData]:
    """Each job's data by name. ``workloads``: each job's checked workload by name, as
    :func:`checked_workloads` gives them (None: that, here, from the scenario's files); a
    job without one trains on the digits split of ``seed``. Jobs that share a workload (or
    the digits) share one copy of its data."""
    workloads = checked_workloads(problem, seed) if workloads is None else workloads
    out: dict[str, JobData] = {}
    read: dict[int, JobData] = {}  # by id() of the workload; the digits under id(None)
    for i, job in enumerate(problem.jobs):
        own = workloads.get(job.name)
        if id(own) not in read:
            if own is None:
                train, val = digits_split(seed=seed)
                read[id(own)] = JobData(train, _frame(val), None)
            else:
                read[id(own)] = _workload_data(own, i, seed)
        out[job.name] = read[id(own)]
    return out
