"""Tables that read at the terminal's width (80 columns when output is not a terminal):
large numbers in engineering notation, and where the columns cannot fit without cutting a
cell, the same figures turned on their side (one column per row) or, failing that, one
paragraph per row."""

from __future__ import annotations

import math

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

__all__ = ["compact", "fitted", "print_fitted"]


def compact(value: float, decimals: int = 1, limit: float = 1e6) -> str:
    """``value`` with thousands separators below ``limit`` (``1,234.5``), else in
    engineering notation with three significant digits (``3.86e11``), so that no figure is
    wider than about ten characters."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < limit:
        return f"{value:,.{decimals}f}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _longest_words(table: Table) -> list[int]:
    """Each column's longest word, header or cell (Rich wraps at spaces)."""
    headers, rows = _headers(table), _cells(table)
    return [max((len(word) for text in (headers[i], *(r[i] for r in rows))
                 for word in text.split()), default=1) for i in range(len(headers))]


def _fitted_as_is(table: Table, width: int) -> bool:
    """Whether ``table`` fits ``width`` columns with no word cut. Where Rich would have to
    shrink it (its widest lines do not fit), each column gets its longest word plus a share
    of the room left, in proportion to what wrapping takes from it: Rich's own shrinking
    would cut some cells."""
    def needed(widths: list[int]) -> int:
        return sum(widths) + 3 * len(widths) + 1  # padding of one each side, the rules

    headers, rows = _headers(table), _cells(table)
    widest = [max(len(line) for text in (headers[i], *(r[i] for r in rows))
                  for line in (text.splitlines() or [""])) for i in range(len(headers))]
    if needed(widest) <= width:
        return True
    longest = _longest_words(table)
    if needed(longest) > width:
        return False
    room = width - needed(longest)
    wanted = [w - least for w, least in zip(widest, longest, strict=True)]
    for column, least, want in zip(table.columns, longest, wanted, strict=True):
        column.width = least + room * want // max(1, sum(wanted))
    return True


def _cells(table: Table) -> list[list[str]]:
    """The table's cells as plain text, row by row."""
    columns = [[Text.from_markup(c).plain if isinstance(c, str) else str(c) for c in col.cells]
               for col in table.columns]
    return [list(row) for row in zip(*columns, strict=True)]


def _headers(table: Table) -> list[str]:
    return [h if isinstance(h, str) else str(h) for h in (c.header for c in table.columns)]


def _sideways(table: Table) -> Table:
    """One column per row of ``table`` (headed by its first cell), one row per figure."""
    headers, rows = _headers(table), _cells(table)
    turned = Table(title=table.title, caption=table.caption)
    turned.add_column(headers[0])
    for row in rows:
        turned.add_column(row[0], justify="right")
    for i, header in enumerate(headers[1:], 1):
        turned.add_row(header, *(row[i] for row in rows))
    return turned


def _blocks(table: Table) -> Group:
    """One paragraph per row of ``table``: its first cell, then each figure with its header
    (``tx2-0: type jetson-tx2; cores 6; ...``), wrapped at spaces."""
    headers, rows = _headers(table), _cells(table)
    parts: list[RenderableType] = [Text(str(table.title or ""), style="italic")]
    for row in rows:
        figures = "; ".join(f"{h} {c}" for h, c in zip(headers[1:], row[1:], strict=True))
        parts.append(Text(f"{row[0]}: {figures}"))
    if table.caption:
        parts.append(Text(str(table.caption), style="dim"))
    return Group(*parts)


def fitted(table: Table, console: Console) -> RenderableType:
    """``table`` as it is where it fits the console's width; else turned on its side;
    else one block per row: no figure is cut."""
    width = console.width
    if not table.columns or _fitted_as_is(table, width):
        return table
    turned = _sideways(table)
    return turned if _fitted_as_is(turned, width) else _blocks(table)


def print_fitted(table: Table, console: Console) -> None:
    """Print ``table`` on ``console`` at its width (:func:`fitted`)."""
    console.print(fitted(table, console))
