"""The problems the manager serves, discovered as installed plugins: it names none of them."""

from __future__ import annotations

from collections.abc import Iterable

from edgewise.anatomy import ENTRY_POINT_GROUP, problems
from edgewise.errors import ConfigError
from edgewise.jobs import JobKind, ProblemApi

__all__ = ["ENTRY_POINT_GROUP", "discover_problems", "job_kinds"]


def discover_problems() -> list[ProblemApi]:
    """The ProblemApi of every problem registered under the ``edgewise.problems``
    entry-point group (``edgewise.anatomy.problems``), in the papers' order; ConfigError if
    a card's api is not a ProblemApi of its name, or offers kinds its card does not list."""
    found: list[ProblemApi] = []
    for card in problems():
        api = card.api()
        if not isinstance(api, ProblemApi) or api.name != card.name:
            raise ConfigError(f"edgewise.{card.name}.api.API is not the ProblemApi "
                              f"{card.name!r}", field=ENTRY_POINT_GROUP)
        kinds = tuple(k.name for k in api.kinds)
        if kinds != card.job_kinds:
            raise ConfigError(f"{card.name}: its card lists the kinds {card.job_kinds}, its "
                              f"api offers {kinds}", field=ENTRY_POINT_GROUP)
        found.append(api)
    return found


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
