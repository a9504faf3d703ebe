"""`HelpScreen` (`?`): every key binding of the console, where it works and what it does.

Built from the bindings themselves — the app's, each tab's (`tui.views.VIEWS`) and the dialogs'
— so it can never list a key that does not exist or miss one that does. The last lines point at
the command palette and the README table that maps each action to its choirctl command.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.dialogs.confirm import ConfirmDialog
from tui.dialogs.prompt import TextPrompt
from tui.views import VIEWS

Row = tuple[str, str, str]
"""(where, keys, what)."""

FOOTNOTE = (
    "Every action is also in the command palette (ctrl+p; type what you want or its choirctl "
    'command), and every one has a choirctl command: see the README, "choir tui ↔ choirctl".'
)


def grouped(app: App[Any], bindings: Iterable[BindingType]) -> Iterator[tuple[str, str]]:
    """(keys, description) per action, keys joined (`n / esc`), in declaration order."""
    keys: dict[str, list[str]] = {}
    described: dict[str, str] = {}
    for binding in Binding.make_bindings(bindings):
        keys.setdefault(binding.action, []).append(app.get_key_display(binding))
        described.setdefault(binding.action, binding.description or binding.action)
    for action, shown in keys.items():
        yield " / ".join(shown), described[action]


def help_rows(app: App[Any]) -> list[Row]:
    """Every binding: the app's, each tab's, then the dialogs'."""
    rows: list[Row] = [("everywhere", app.get_key_display(Binding("ctrl+p", "")), "Commands")]
    rows += [("everywhere", keys, what) for keys, what in grouped(app, app.BINDINGS)]
    for spec in VIEWS:
        bindings = spec.view.BINDINGS
        rows += [(f"{spec.key} {spec.title}", keys, what) for keys, what in grouped(app, bindings)]
    rows += [("confirmations", k, w) for k, w in grouped(app, ConfirmDialog.BINDINGS)]
    rows += [("prompts", "enter", "Submit")]
    rows += [("prompts", k, w) for k, w in grouped(app, TextPrompt.BINDINGS)]
    return rows


class HelpScreen(ModalScreen[None]):
    """The key list; escape, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80; max-width: 100%; height: 90%; border: thick $primary;
        background: $surface; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        table = Table(title="choir tui — keys", show_edge=False, pad_edge=False)
        table.add_column("where", style="bold", no_wrap=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("does")
        previous = ""
        for where, keys, what in help_rows(self.app):
            table.add_row(where if where != previous else "", keys, what)
            previous = where
        with VerticalScroll():
            yield Static(table, id="help-keys")
            yield Static(Text(FOOTNOTE, style="italic"), id="help-footnote")

    def action_close(self) -> None:
        self.dismiss(None)
