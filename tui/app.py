"""`choir tui`: the full-screen operator console on choird's operator socket.

The app is the composition root of the console: a health header, a banner while disconnected,
one tab per view of `tui.views.VIEWS`, and the footer. The bridge (`tui.bridge`) posts news;
`_news` folds it into `self.state` and forwards a copy to every view — attributes down, messages
up. Selection of an agent lives in `state.selected_agent` and changes only via `select_agent`.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, TabbedContent, TabPane

from choir.home import ChoirHome
from tui.bridge import ChoirBridge
from tui.commands import ChoirCommands
from tui.dialogs.help import HelpScreen
from tui.event_follow import EventFollower
from tui.messages import (
    AgentSelected,
    AgentsUpdated,
    ApprovalChanged,
    ConfigChanged,
    ConnectionChanged,
    ConsoleNews,
    LaneReported,
    LocksReported,
    SessionChanged,
    StatusUpdated,
)
from tui.state import ConsoleState
from tui.views import VIEWS, ChoirView, ViewSpec
from tui.widgets.health import ConnectionBanner, HealthBar
from tui.widgets.offline import DENIED, NOT_RUNNING, OfflineScreen


def utc_now() -> datetime:
    return datetime.now(UTC)


class ChoirApp(App[None]):
    """The operator console. `ChoirApp(home).run()`; `connect=False` leaves choird alone (tests
    of layout and benchmarks drive `state` and the views directly)."""

    CSS_PATH = "app.tcss"
    TITLE = "choir"
    COMMANDS: ClassVar = App.COMMANDS | {ChoirCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("left_square_bracket", "cycle_agent(-1)", "Prev agent"),
        Binding("right_square_bracket", "cycle_agent(1)", "Next agent"),
        *(
            Binding(view.key, f"show_tab('{view.view_id}')", view.title, show=False)
            for view in VIEWS
        ),
    ]

    def __init__(self, home: ChoirHome | None = None, *, connect: bool = True) -> None:
        super().__init__()
        self.home = home or ChoirHome.resolve()
        self.state = ConsoleState()
        """Everything the console knows about choird (read by views, written by `_news`)."""
        self.bridge = ChoirBridge(self, self.home)
        """The link to choird; views call `self.bridge.ask(verb, Model, **payload)` in workers."""
        self.follower = EventFollower(self, self.bridge)
        """Follows the selected agent's session events (the Events and Cores tabs)."""
        self.views: dict[str, ChoirView] = {}
        """Mounted views by id."""
        self._connect = connect
        self.health = HealthBar(id="health")
        self.banner = ConnectionBanner(id="banner")
        self.clock: Callable[[], datetime] = utc_now
        """Now, for ages and uptimes (tests and snapshots fix it)."""

    def compose(self) -> ComposeResult:
        yield self.health
        yield self.banner
        with TabbedContent(id="tabs"):
            for view in VIEWS:
                with TabPane(f"{view.key} {view.title}", id=view.view_id):
                    yield self._view(view)
        yield Footer()

    def _view(self, spec: ViewSpec) -> ChoirView:
        view = spec.view(id=f"view-{spec.view_id}")
        self.views[spec.view_id] = view
        return view

    def on_mount(self) -> None:
        self._draw_health()
        self.call_after_refresh(self._focus_view, VIEWS[0].view_id)
        if self._connect:
            self.bridge.start()

    # news from the bridge

    @on(ConsoleNews)
    def _news(self, message: ConsoleNews) -> None:
        self._fold(message)
        for view in self.views.values():
            if view.is_mounted:
                view.post_message(copy.copy(message))

    def _fold(self, message: ConsoleNews) -> None:
        state = self.state
        match message:
            case ConnectionChanged(connection, detail):
                state.connection, state.connection_detail = connection, detail
                self._offline()
                self._draw_health()
            case StatusUpdated(status):
                state.set_status(status)
                self._draw_health()
            case AgentsUpdated(agents):
                state.set_agents(agents)
                self._keep_selection()
                self._follow_selected()
                self._draw_health()
            case SessionChanged(data):
                state.session_ended(data)
            case ApprovalChanged(data):
                state.approval_changed(data)
                self._draw_health()
            case LaneReported(data):
                held = len(state.held_jobs())
                if state.lane_reported(data):
                    self.bridge.refresh_agents()
                if len(state.held_jobs()) != held:
                    self._draw_health()
            case LocksReported(data):
                state.locks[data.session_id] = data
            case ConfigChanged(data):
                state.config_version = data.config_version
                self._draw_health()

    def _draw_health(self) -> None:
        self.health.update_from(self.state)
        self.banner.update_from(self.state)

    def _offline(self) -> None:
        """Show the offline screen while choird was never reached (or refuses us)."""
        state = self.state
        if not self.screen_stack:  # shutting down
            return
        if state.connection in ("not_running", "denied"):
            text = (
                NOT_RUNNING.format(socket=self.home.operator_socket, home=self.home.root)
                if state.connection == "not_running"
                else DENIED.format(detail=state.connection_detail)
            )
            if isinstance(self.screen, OfflineScreen):
                self.screen.update(text)
            else:
                self.push_screen(OfflineScreen(text))
        elif state.connection == "connected" and isinstance(self.screen, OfflineScreen):
            self.pop_screen()

    # selection

    def select_agent(self, agent_id: str | None) -> None:
        """Make `agent_id` the agent every per-agent view shows."""
        if agent_id == self.state.selected_agent:
            return
        self.state.selected_agent = agent_id
        self.post_message(AgentSelected(agent_id, self.state.session_of(agent_id)))
        self._follow_selected()

    def _follow_selected(self) -> None:
        """Follow the events of the selected agent's latest session (a stopped one's too)."""
        agent = self.state.agents.get(self.state.selected_agent or "")
        session_id = agent.session_id if agent else None
        if self._connect:
            self.follower.follow(str(session_id) if session_id else None)

    def _keep_selection(self) -> None:
        agents = self.state.agents
        if self.state.selected_agent in agents or not agents:
            return
        running = [agent_id for agent_id, agent in agents.items() if agent.state == "running"]
        self.select_agent((running or list(agents))[0])

    # actions

    def action_show_tab(self, view_id: str) -> None:
        self.query_one(TabbedContent).active = view_id
        self._focus_view(view_id)

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id is not None:
            self._focus_view(event.pane.id)

    def _focus_view(self, view_id: str) -> None:
        """Keys go to the shown view: focus its first focusable widget (its table, its log)."""
        view = self.views.get(view_id)
        if view is not None and view.is_mounted:
            view.focus_main()

    def action_cycle_agent(self, step: int) -> None:
        ids = list(self.state.agents)
        if not ids:
            return
        current = self.state.selected_agent
        index = ids.index(current) if current in ids else -step
        self.select_agent(ids[(index + step) % len(ids)])

    def action_help(self) -> None:
        """The help screen: every key binding, where it works."""
        self.push_screen(HelpScreen())


def main(argv: Sequence[str] | None = None) -> None:
    """`choir tui [--home DIR]`."""
    parser = argparse.ArgumentParser(
        prog="choir tui", description="The full-screen operator console (needs a running choird)."
    )
    parser.add_argument(
        "--home", type=Path, help="the CHOIR_HOME choird runs in (default: $CHOIR_HOME, ~/.choir.d)"
    )
    args = parser.parse_args(argv)
    ChoirApp(ChoirHome.resolve(args.home)).run()
