"""`Caption`: a one-line status text that repaints only itself, and only when it changed.

`Static.update` re-lays-out the whole screen by default; a line of fixed height never needs
that, and under an event flood the layout passes cost more than the events.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class Caption(Static):
    """One line (`height: 1`); `show()` it new text."""

    DEFAULT_CSS = """
    Caption { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, text: str | Text = "", *, id: str | None = None) -> None:
        super().__init__(text, id=id)
        self._shown: str | Text = text

    def show(self, text: str | Text) -> None:
        if text == self._shown:
            return
        self._shown = text
        self.update(text, layout=False)
