"""Keeping a `DataTable` in step with a listing without losing the operator's cursor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

Cell = Text | str


def sync_rows(
    table: DataTable[Any], columns: Sequence[str], rows: Sequence[tuple[str, Sequence[Cell]]]
) -> None:
    """Make `table` show `rows` (key, cells): cells updated in place when the keys are the same
    rows in the same order, else the rows rebuilt with the cursor kept on its key."""
    keys = [key for key, _ in rows]
    if keys == [str(row.value) for row in table.rows]:
        for key, cells in rows:
            for column, cell in zip(columns, cells, strict=True):
                table.update_cell(key, column, cell)
        return
    current = _cursor_key(table)
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if current in keys:
        table.move_cursor(row=keys.index(current))


def _cursor_key(table: DataTable[Any]) -> str | None:
    if not table.row_count:
        return None
    try:
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
    except Exception:  # the cursor is off the table (it was just cleared)
        return None
    return None if row_key.value is None else str(row_key.value)
