"""The CLI's tables, laid out to fit the console they print on.

rich shrinks a table wider than its console by cutting cells, headers included, to "sess…". So a
command describes its table once (its fields and its rows) and offers layouts from the richest
(every column, whole ids) to the leanest, and ``fit_table`` prints the first whose every header and
word fits the console's width. In a pipe the console is wide (``stdout_console``), the first layout
wins and scripts read whole ids; in an 80-column terminal ids shrink to their last characters (a
caption says so), then the columns a reader needs least go or merge. ``--wide`` keeps ids whole and
drops columns instead, so an id can be copied from any terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["SHORT_ID", "Field", "Layout", "fit_table", "fits", "short_id"]

SHORT_ID = 8
"""Characters of an id a narrow terminal shows: its last ones (the first are a timestamp that ids made
together share, the last are random)."""

Kind = Literal["id", "key", "word", "text", "number"]
"""How a field's cells lay out:

- ``id``: whole and never wrapped, or its last ``SHORT_ID`` characters when the layout says so;
- ``key``: always whole and never wrapped (a resume token: a command needs every character);
- ``word``: short values (a name, a status, a time) that wrap between words, never inside one;
- ``text``: free text (a title, a message, arguments) that wraps, and folds a word too long for it;
- ``number``: right-aligned, never wrapped.
"""


@dataclass(frozen=True)
class Field:
    """One column a table can show: its header, how its cells lay out, and how narrow it may get.

    ``min_width`` keeps free text readable: below it a layout does not fit, and a leaner one is
    tried (JSON folded into a 10-character column is no longer read, only decoded).
    """

    header: str
    kind: Kind = "word"
    min_width: int = 0


@dataclass(frozen=True)
class Layout:
    """Which fields a table shows, in order, and whether its ids are whole."""

    headers: tuple[str, ...]
    whole_ids: bool = True


def short_id(value: str) -> str:
    """``value``'s last ``SHORT_ID`` characters after an ellipsis, so a shortened id says it is one."""
    return value if len(value) <= SHORT_ID + 1 else f"…{value[-SHORT_ID:]}"


def _column_widths(console: Console, table: Table) -> tuple[int, list[tuple[int, int]]]:
    """The width the unwrapped columns take, and (narrowest, widest) for each wrapping column, with padding."""
    options = console.options
    _, right, _, left = table.padding
    rigid = 0
    wrapping: list[tuple[int, int]] = []
    for column in table.columns:
        header = Measurement.get(console, options, column.header)
        cells = [Measurement.get(console, options, cell) for cell in column.cells]
        widest = max([header.maximum, *(cell.maximum for cell in cells)]) + left + right
        if column.no_wrap:
            rigid += widest
            continue
        # A folding column may break its cells' words, never its header's; none goes below its min_width.
        words = [header.minimum] if column.overflow == "fold" else [header.minimum, *(c.minimum for c in cells)]
        narrowest = max([*words, column.min_width or 0]) + left + right
        wrapping.append((narrowest, max(widest, narrowest)))
    return rigid, wrapping


def fits(console: Console, table: Table) -> bool:
    """Whether rich lays ``table`` out within the console's width without cutting a header or a word.

    rich gives each column its widest cell; when the sum is too wide it narrows the widest wrapping
    columns first, all down to one common width, and leaves ``no_wrap`` columns as they are. So
    nothing is cut when the table is within the width with its wrapping columns at that common
    width set to the widest any of them must keep (its longest word, its header's, its min_width).
    """
    rigid, wrapping = _column_widths(console, table)
    level = max((narrowest for narrowest, _ in wrapping), default=0)
    count = len(table.columns)
    borders = (count + 1 if table.show_edge else count - 1) if table.box is not None else 0
    return rigid + sum(min(widest, level) for _, widest in wrapping) + borders <= console.width


def _cell(field: Field, value: str, whole_ids: bool) -> Text:
    # Text, not a markup string: a title like "[bold]" or "[/]" is shown as written, never parsed.
    return Text(short_id(value) if field.kind == "id" and not whole_ids and value else value)


def _build(
    title: str,
    fields: Sequence[Field],
    rows: Sequence[Sequence[str]],
    layout: Layout,
    *,
    fold_ids: bool,
) -> Table:
    index = {field.header: i for i, field in enumerate(fields)}
    shown = [index[header] for header in layout.headers]
    shortened = not layout.whole_ids and any(fields[i].kind == "id" for i in shown)
    caption = f"ids: their last {SHORT_ID} characters (--wide: whole)" if shortened and rows else None
    # Text, not markup, for the title too: it may hold a path or a name with brackets.
    table = Table(title=Text(title, style="table.title"), caption=caption)
    for i in shown:
        field = fields[i]
        rigid = field.kind == "number" or (field.kind in ("id", "key") and not fold_ids)
        overflow: Literal["fold", "ellipsis"] = "fold" if field.kind == "text" or fold_ids else "ellipsis"
        justify: Literal["left", "right"] = "right" if field.kind == "number" else "left"
        table.add_column(
            field.header,
            no_wrap=rigid,
            overflow=overflow,
            justify=justify,
            # Not on the fallback: rich widens a column back to its min_width, past the console's edge.
            min_width=None if fold_ids or not field.min_width else field.min_width,
        )
    for row in rows:
        table.add_row(*(_cell(fields[i], row[i], layout.whole_ids) for i in shown))
    return table


def fit_table(
    console: Console,
    title: str,
    fields: Sequence[Field],
    rows: Sequence[Sequence[str]],
    layouts: Sequence[Layout],
    *,
    wide: bool = False,
) -> Table:
    """The table of the first of ``layouts`` that ``fits`` the console (with ``wide``: of those with whole ids).

    ``rows`` hold a value for every field, in the order of ``fields``. When no layout fits (a very
    narrow terminal, a very long value), the last is returned with its ids and keys folded onto
    several lines rather than cut: every character is still there.
    """
    candidates = [layout for layout in layouts if layout.whole_ids] if wide else list(layouts)
    if not candidates:
        raise ValueError("fit_table needs a layout with whole ids")
    for layout in candidates:
        table = _build(title, fields, rows, layout, fold_ids=False)
        if fits(console, table):
            return table
    return _build(title, fields, rows, candidates[-1], fold_ids=True)
