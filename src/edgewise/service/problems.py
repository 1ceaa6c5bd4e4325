"""The problems the manager serves, discovered as installed plugins: it names none of them."""

from __future__ import annotations

from importlib.metadata import entry_points

from edgewise.errors import ConfigError
from edgewise.runtime.jobs import ProblemApi

__all__ = ["ENTRY_POINT_GROUP", "discover_problems"]

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
