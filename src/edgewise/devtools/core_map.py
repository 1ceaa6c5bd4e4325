"""`python -m edgewise.devtools.core_map`: what the core offers, one line a module, and
which problems use each module (directly, or through other core modules), as the markdown
table of ``docs/architecture.md`` (``--write docs/architecture.md`` replaces it there).

The import graph is grimp's (the library import-linter checks the layers with); a module's
line is the first sentence of its docstring.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import grimp

from edgewise.anatomy import problem_names

__all__ = ["CORE", "CoreModule", "core_map", "main", "markdown", "rewrite"]

CORE = ("cluster", "nn", "perf", "runtime")
"""The core's packages, lowest first."""


@dataclass(frozen=True, slots=True)
class CoreModule:
    """One module of the core: its one line, and the problems and layers that use it."""

    name: str
    line: str
    problems: tuple[str, ...]
    others: tuple[str, ...]


def _first_sentence(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
    text = " ".join(doc.split())
    for match in re.finditer(r"\. (?=[A-Z`(])", text):
        word = text[:match.start()].rsplit(" ", 1)[-1]
        if len(word) > 3 and not word[-1].isdigit():  # not "Eq.", "Fig.", "1."
            text = text[:match.start() + 1]
            break
    if len(text) > 200:
        text = text[:text.rfind(" ", 0, 197)] + " …"
    return text.replace("|", "\\|")


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def core_map() -> list[CoreModule]:
    """Every module of the core packages (not the packages themselves), with its users: a
    problem uses a module it imports, or imports through other core modules."""
    graph = grimp.build_graph("edgewise")
    names = set(problem_names())
    core = sorted(m for m in graph.modules if _package(m) in CORE and m.count(".") >= 2
                  and not graph.find_children(m))
    found = []
    for module in core:
        users: set[str] = set()
        for user in graph.find_downstream_modules(module):
            users.add(_package(user))
        problems = tuple(sorted(users & names))
        others = tuple(sorted(u for u in users - names - set(CORE) if u))
        found.append(CoreModule(module, _first_sentence(module), problems, others))
    return found


def markdown(modules: list[CoreModule]) -> str:
    """The table: module, what it offers, the problems using it, the other layers."""
    rows = ["| module | offers | problems using it | also used by |", "|---|---|---|---|"]
    for m in modules:
        short = m.name.removeprefix("edgewise.")
        rows.append(f"| `{short}` | {m.line} | {', '.join(m.problems) or '—'} | "
                    f"{', '.join(m.others) or '—'} |")
    return "\n".join(rows)


def rewrite(doc: Path, table: str) -> None:
    """Replace the table in ``doc`` that starts with ``table``'s header line."""
    lines = doc.read_text().splitlines()
    header = table.splitlines()[0]
    start = lines.index(header)
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")),
               len(lines))
    doc.write_text("\n".join([*lines[:start], table, *lines[end:]]) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Print the table, or with ``--write DOC`` replace it in DOC."""
    args = sys.argv[1:] if argv is None else argv
    table = markdown(core_map())
    if args[:1] == ["--write"] and len(args) == 2:
        rewrite(Path(args[1]), table)
        return 0
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
