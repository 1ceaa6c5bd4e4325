"""docs/architecture.md lists every module of the core (what the core offers), as the
import graph finds them (``python -m edgewise.devtools.core_map``)."""

from __future__ import annotations

from pathlib import Path

from edgewise.anatomy import problems
from edgewise.devtools.core_map import core_map, markdown

DOC = Path(__file__).parents[1] / "docs" / "architecture.md"


def test_every_core_module_has_its_line_in_the_architecture_doc() -> None:
    text = DOC.read_text()
    modules = core_map()

    missing = [m.name for m in modules if f"| `{m.name.removeprefix('edgewise.')}` |" not in text]
    assert len(modules) > 50 and missing == []
    assert markdown(modules).splitlines()[0] in text


def test_the_doc_lists_the_problems_of_the_entry_points() -> None:
    text = DOC.read_text()

    assert all(f"| `{card.name}` | " in text for card in problems())


def test_no_two_modules_import_each_other() -> None:
    """No import cycle between edgewise's modules, even through imports inside functions
    (issue 25 broke continual bench/sweep, plots/sweep_plots and npzdata/sources)."""
    import grimp
    import networkx as nx

    graph = grimp.build_graph("edgewise", exclude_type_checking_imports=True)
    edges = nx.DiGraph((m, n) for m in graph.modules
                       for n in graph.find_modules_directly_imported_by(m)
                       if n.startswith("edgewise."))
    cycles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]

    assert cycles == []
