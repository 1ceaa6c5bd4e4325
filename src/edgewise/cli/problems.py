"""`edgewise problems [--json]`: the problems this installation offers, from their cards
(the entry points ``edgewise.problems``): paper, types, policies, bench and kind of job."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from edgewise.anatomy import problems
from edgewise.cli.common import out, user_errors
from edgewise.cli.tables import print_fitted

__all__ = ["listing", "problems_command"]


def listing() -> list[dict[str, Any]]:
    """Each problem's card as JSON (imports each policy registry)."""
    return [card.listing() for card in problems()]


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="problems (entry points edgewise.problems)")
    for column in ("problem", "paper", "policies", "bench", "job kind", "executor takes"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["paper"], ", ".join(r["policies"]), r["bench"],
                      ", ".join(r["job_kinds"]), r["executor_takes"])
    return table


@user_errors
def problems_command(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON list on stdout")] = False,
) -> None:
    """List the problems: the paper each implements, its policies, its bench
    (`edgewise bench NAME`), its kind of manager job and its command group."""
    rows = listing()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print_fitted(_table(rows), out)
    out.print("Each problem is a package with the same anatomy (docs/architecture.md): "
              "problem, policies, sim, run (its one executor), bench, api.")
