"""`ResultScreen`: what choird answered to a read-only action, or the progress of a long one.

A `show` action (agent status, model list…) puts choird's answer here as indented JSON, the same
data `choirctl … --json` prints. A `report` action (agent update) appends each progress line as
it arrives and the result at the end, so a build of several minutes is never a frozen screen.
Escape, q or enter closes it; closing does not stop what choird is doing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Static


def as_lines(answer: Any) -> list[str]:
    """An answer (a model of `choir.protocol.operator`, or JSON data) as indented JSON lines
    (keys sorted, as `choirctl --json` prints)."""
    from pydantic import BaseModel  # loaded by then: the answer was parsed with it

    if isinstance(answer, BaseModel):
        answer = answer.model_dump(mode="json")  # its wire form
    return json.dumps(answer, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


class ResultScreen(ModalScreen[None]):
    """A titled, scrollable text; `add` appends lines (progress), `finish` sets the status."""

    DEFAULT_CSS = """
    ResultScreen { align: center middle; }
    ResultScreen > Vertical {
        width: 90%; height: 85%; border: thick $primary; background: $surface; padding: 0 1;
    }
    ResultScreen #result-title { text-style: bold; height: auto; }
    ResultScreen #result-status { color: $text-muted; height: auto; }
    ResultScreen Log { height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "close", "Close", show=False),
    ]

    def __init__(self, title: str, lines: Iterable[str] = (), *, status: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.status = status
        """The line under the title: `working…`, `done`, or the failure."""
        self.lines = list(lines)
        """Every line shown so far."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="result-title", markup=False)
            yield Static(self.status or "escape closes", id="result-status", markup=False)
            yield Log(id="result-log")

    def on_mount(self) -> None:
        log = self.query_one(Log)
        log.write_lines(self.lines)
        log.focus()

    def add(self, lines: Iterable[str]) -> None:
        batch = list(lines)
        self.lines.extend(batch)
        if self.is_mounted:
            self.query_one(Log).write_lines(batch)

    def finish(self, status: str) -> None:
        self.status = status
        if self.is_mounted:
            self.query_one("#result-status", Static).update(f"{status} · escape closes")

    def action_close(self) -> None:
        self.dismiss(None)
