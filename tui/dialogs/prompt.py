"""`TextPrompt`: one line of text for an action's argument (an agent id, a job name…).

Enter submits, escape cancels (result None). An empty answer is not submitted unless the
prompt allows it; `choices`, when given, are listed under the input and, when `strict`, the
answer must be one of them, so a typo is caught here rather than sent to choird.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line of text; the result is the stripped text, or None when cancelled."""

    DEFAULT_CSS = """
    TextPrompt { align: center middle; }
    TextPrompt > Vertical {
        width: 70; max-width: 95%; height: auto; border: thick $primary;
        background: $surface; padding: 1 2;
    }
    TextPrompt #label { text-style: bold; }
    TextPrompt #choices { color: $text-muted; }
    TextPrompt #problem { color: $error; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(
        self,
        label: str,
        *,
        value: str = "",
        placeholder: str = "",
        choices: Sequence[str] = (),
        allow_empty: bool = False,
        strict: bool = True,
    ) -> None:
        super().__init__()
        self.label = label
        """What to type, e.g. "Cancel which core job of session s-1?"."""
        self.value = value
        """The answer the input starts with (the current selection, when there is one)."""
        self.placeholder = placeholder
        self.choices = tuple(choices)
        """Answers to offer; with `strict`, the only acceptable ones."""
        self.allow_empty = allow_empty
        self.strict = strict

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.label, id="label", markup=False)
            yield Input(self.value, placeholder=self.placeholder, id="answer")
            if self.choices:
                lead = "one of: " if self.strict else "for example: "
                yield Static(lead + ", ".join(self.choices), id="choices", markup=False)
            yield Static("", id="problem", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        answer = event.value.strip()
        problem = self.problem(answer)
        if problem:
            self.query_one("#problem", Static).update(problem)
            return
        self.dismiss(answer)

    def problem(self, answer: str) -> str:
        """Why `answer` cannot be submitted ("" when it can)."""
        if not answer and not self.allow_empty:
            return "type an answer, or press escape to cancel"
        if self.strict and self.choices and answer and answer not in self.choices:
            return f"{answer!r} is not one of: {', '.join(self.choices)}"
        return ""
