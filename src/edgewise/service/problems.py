"""The problems the manager serves, discovered as installed plugins: it names none of them."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import entry_points

from edgewise.errors import ConfigError
from edgewise.runtime.jobs import JobKind, ProblemApi

__all__ = ["ENTRY_POINT_GROUP", "discover_problems", "job_kinds"]

ENTRY_POINT_GROUP = "edgewise.problems"


def discover_problems() -> list[ProblemApi]:
    """Every ProblemApi registered under the ``edgewise.problems`` entry-point group, by
    name; ConfigError if an entry is not a ProblemApi or two share a name."""
    found: dict[str, ProblemApi] = {}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        api = entry.load()
        if not isinstance(api, ProblemApi):
            raise ConfigError(f"entry point {entry.value} is not a ProblemApi",
                              field=ENTRY_POINT_GROUP)
        if api.name in found:
            raise ConfigError(f"two problems named {api.name!r}", field=ENTRY_POINT_GROUP)
        found[api.name] = api
    return list(found.values())


def job_kinds(problems: Iterable[ProblemApi]) -> dict[str, JobKind]:
    """The kinds of job the problems offer, by name; ConfigError if two share a name."""
    kinds: dict[str, JobKind] = {}
    for problem in problems:
        for kind in problem.kinds:
            if kind.name in kinds:
                raise ConfigError(f"two kinds of job named {kind.name!r}",
                                  field=ENTRY_POINT_GROUP)
            kinds[kind.name] = kind
    return kinds
