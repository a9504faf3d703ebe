"""`ConfirmDialog`: one yes/no question before an action that changes something.

It dismisses with True only on an explicit yes (`y`, or the yes button); `n`, escape, the
cancel button or a click outside answer False. Focus starts on cancel, so a stray Enter never
approves, resets or applies anything.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.events import Click
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmDialog(ModalScreen[bool]):
    """A question with a yes and a cancel answer; the result is True for yes."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical {
        width: auto; min-width: 40; max-width: 90%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    ConfirmDialog.-danger > Vertical { border: thick $error; }
    ConfirmDialog #question { text-style: bold; width: auto; max-width: 100%; }
    ConfirmDialog #detail { color: $text-muted; margin-top: 1; width: auto; max-width: 100%; }
    ConfirmDialog Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmDialog Button { margin-left: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", show=False),
        Binding("n,escape", "answer(False)", "No", show=False),
    ]

    def __init__(
        self, question: str, detail: str = "", *, yes: str = "Yes", danger: bool = False
    ) -> None:
        super().__init__(classes="-danger" if danger else None)
        self.question = question
        """The one-line question, e.g. "Approve ap-1234 from agent-1?"."""
        self.detail = detail
        """What happens next, shown below the question (may be empty)."""
        self.yes_label = yes
        """The yes button's label ("Approve", "Reset"…); `y` answers yes whatever it says."""
        self.danger = danger
        """Whether yes destroys something (red border and yes button)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="question", markup=False)
            if self.detail:
                yield Static(self.detail, id="detail", markup=False)
            with Horizontal():
                yield Button("Cancel (n)", id="no")
                yield Button(
                    f"{self.yes_label} (y)", id="yes", variant="error" if self.danger else "primary"
                )

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def on_click(self, event: Click) -> None:
        if event.widget is self:  # outside the box
            self.dismiss(False)
