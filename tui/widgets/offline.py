"""The screen shown while no choird answers (or its socket refuses us): how to start it.

The bridge keeps retrying underneath; the app pops this screen as soon as it connects.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

NOT_RUNNING = """\
[b]choird is not running[/b]

The console talks to choird on {socket}.
Start it, then this screen goes away by itself:

    [b]choir up[/b]      start choird and the default agent
    [b]choird[/b]        start choird only (in another terminal)

CHOIR_HOME is {home} (set $CHOIR_HOME for another).
"""

DENIED = """\
[b]permission denied[/b]

{detail}

choird's operator socket is private to the user running choird (mode 0600).
Run `choir tui` as that user, or point $CHOIR_HOME at your own home.
"""


RETRYING = "retrying every few seconds… (q quits)"


class OfflineScreen(Screen[None]):
    """Full-screen help while the console cannot reach choird; q quits."""

    DEFAULT_CSS = """
    OfflineScreen { align: center middle; }
    OfflineScreen > Vertical {
        width: auto; max-width: 80; height: auto; padding: 1 2; border: round $error;
    }
    OfflineScreen Static { width: auto; max-width: 76; }
    OfflineScreen #retry { color: $text-muted; margin-top: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.text, id="offline-text")
            yield Static(RETRYING, id="retry")

    def update(self, text: str) -> None:
        self.text = text
        for shown in self.query("#offline-text").results(Static):  # none before it composed
            shown.update(text)
