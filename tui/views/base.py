"""`ChoirView`: the base class of every tab of the console (see `tui.views` for the contract)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from textual.widget import Widget

from choir.errors import ChoirError
from tui.bridge import answer_notes, parsed_answer

if TYPE_CHECKING:
    from tui.bridge import ChoirBridge
    from tui.state import ConsoleState


@dataclass(frozen=True)
class PaletteCommand:
    """One command palette entry a view offers; `run` is called on the UI thread."""

    title: str
    """What the operator types to find it, e.g. "Agents: stop the selected agent"."""
    help: str
    """One line shown under the title: what it does, and its choirctl equivalent."""
    run: Callable[[], object]


class ConsoleHost(Protocol):
    """What views and the command palette use of the console app beyond Textual's `App`.

    `tui.app.ChoirApp` is the one host; views and the palette see it through this protocol, so
    they never import the app that composes them (no app <-> views import cycle)."""

    state: ConsoleState
    bridge: ChoirBridge
    views: dict[str, ChoirView]
    """Mounted views by id."""
    clock: Callable[[], datetime]
    """Now, for ages and uptimes."""

    def select_agent(self, agent_id: str | None) -> None: ...

    def action_show_tab(self, view_id: str) -> None: ...


class ChoirView(Widget):
    """A tab of the console. Attributes down (`self.state`), messages up.

    Subclasses set `VIEW_ID` and `TITLE`, compose their widgets, and redraw from `self.state`
    in `redraw()` — which the base calls on mount, on `Resynced` and on `AgentSelected`. Live
    news arrives as `tui.messages` handlers (`on_lane_reported`…), forwarded by the app.
    """

    DEFAULT_CSS = """
    ChoirView { height: 1fr; }
    """

    VIEW_ID: ClassVar[str] = ""
    """The registry id (`tui.views.VIEWS`), also the tab's id."""
    TITLE: ClassVar[str] = ""
    """The tab's label."""

    @property
    def console(self) -> ConsoleHost:
        """The app, as the console host it is."""
        return cast("ConsoleHost", self.app)

    @property
    def state(self) -> ConsoleState:
        return self.console.state

    @property
    def bridge(self) -> ChoirBridge:
        return self.console.bridge

    @property
    def selected_agent(self) -> str | None:
        """The agent chosen in the Agents tab (or with [ and ]), shared by every view."""
        return self.state.selected_agent

    @property
    def selected_session(self) -> str | None:
        """The selected agent's active session, None when it is not running."""
        return self.state.session_of(self.state.selected_agent)

    def focus_main(self) -> None:
        """Focus the widget keys should reach when the tab is shown (its first focusable)."""
        for widget in self.query("*"):
            if widget.focusable and widget.display:
                widget.focus()
                return

    def redraw(self) -> None:
        """Draw everything again from `self.state` (cheap: called on resync and selection)."""

    def on_mount(self) -> None:
        self.redraw()

    def on_resynced(self) -> None:
        self.redraw()

    def on_agent_selected(self) -> None:
        self.redraw()

    def palette_commands(self) -> Iterable[PaletteCommand]:
        """The commands this view adds to the command palette (ctrl+p)."""
        return ()

    async def act(self, verb: str, done: str, *, long_running: bool = False, **payload: Any) -> Any:
        """Call `verb` (from a worker), notify `done` or choird's refusal; the answer parsed as
        the verb's model (`OPERATOR_MODELS`), or None when refused.

        `long_running` verbs (a graceful stop) get a connection without a call timeout."""
        call = self.bridge.call_long if long_running else self.bridge.call
        try:
            answer = parsed_answer(verb, await call(verb, **payload))
        except ChoirError as error:
            self.notify(error.message, title=verb, severity="error", timeout=8)
            return None
        self.notify("\n".join([done, *answer_notes(answer)]), title=verb, markup=False)
        return answer
