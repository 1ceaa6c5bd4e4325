"""The ``sites`` job's workloads: built from its HTTP spec (the spec's ``workload`` for every
job, or a scenario job's own, both :class:`HttpWorkload`, never a path the caller chooses)
and checked at submission by the dry run a real run gives them (:func:`jobdata.checked`)."""

from __future__ import annotations

from edgewise.errors import ConfigError
from edgewise.jobs.workload import HttpWorkload
from edgewise.nn.workload import Workload
from edgewise.sites.api_schemas import SitesJobSpec
from edgewise.sites.chunks import check_data
from edgewise.sites.jobdata import checked
from edgewise.sites.problem import SitesProblem

__all__ = ["check_workloads", "job_workloads"]

Built = list[tuple[str, Workload, str]]
"""(job name, its workload, the prefix of the field it came from) per job that has one."""


def _sources(spec: SitesJobSpec, problem: SitesProblem) -> list[tuple[str, HttpWorkload, str]]:
    """Each job's HTTP workload: its scenario entry's (field ``scenario.jobs[i].workload``),
    else the spec's (``workload``); a job with neither trains the digits CNN."""
    entries = spec.scenario.jobs if spec.scenario is not None else []
    out = []
    for i, job in enumerate(problem.jobs):
        own = entries[i].workload if i < len(entries) else None
        if own is not None:
            out.append((job.name, own, f"scenario.jobs[{i}]."))
        elif spec.workload is not None:
            out.append((job.name, spec.workload, ""))
    return out


def _built(spec: SitesJobSpec, problem: SitesProblem) -> Built:
    """The workloads of :func:`_sources` built (one object per field, so the jobs given the
    spec's share it); ConfigError naming ``[scenario.jobs[i].]workload.<field>``."""
    done: dict[str, Workload] = {}
    out: Built = []
    for name, http, prefix in _sources(spec, problem):
        if prefix not in done:
            try:
                done[prefix] = http.to_workload()
            except ConfigError as exc:
                raise ConfigError(exc.problem, field=prefix + (exc.field or "workload")) from None
        out.append((name, done[prefix], prefix))
    return out


def job_workloads(spec: SitesJobSpec, problem: SitesProblem) -> dict[str, Workload]:
    """Each job's workload by name, built from the spec (a job with none is left out: the
    digits CNN); what ``sites.run.execute`` takes as ``workloads``. ConfigError naming the
    field."""
    return {name: workload for name, workload, _ in _built(spec, problem)}


def check_workloads(spec: SitesJobSpec, problem: SitesProblem) -> None:
    """Dry-run each workload of the spec once, as a real run does before any actor starts,
    and check its training split has a sample per chunk of each job it trains. ConfigError
    naming ``[scenario.jobs[i].]workload.<field>``, or the job's ``data`` (the cluster's
    scenario: ``workload.data``) for too few samples. Heavy: builds the networks."""
    samples: dict[str, int] = {}  # training samples by field prefix
    sizes: dict[str, int] = {}  # by job name
    for name, workload, prefix in _built(spec, problem):
        if prefix not in samples:
            try:
                samples[prefix] = checked(workload, spec.seed)[1]
            except ConfigError as exc:
                raise ConfigError(exc.problem,
                                  field=f"{prefix}workload.{exc.field or 'model'}") from None
        sizes[name] = samples[prefix]
    try:
        check_data(problem, sizes, own=sizes)
    except ConfigError as exc:
        field = f"scenario.{exc.field}" if spec.scenario is not None else "workload.data"
        raise ConfigError(exc.problem, field=field) from None
