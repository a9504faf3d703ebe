"""The console's tabs, and the contract every view follows.

How a view is written
---------------------
A view is a `ChoirView` (`tui.views.base`) subclass in `tui/views/<id>.py`, constructed with no
arguments; it sets `VIEW_ID` and `TITLE` and is listed below in `VIEWS`.

- **State down.** The app keeps one `ConsoleState` (`self.state`: agents, lanes, locks,
  approvals, status, connection) that it updates from the bridge before any view hears the news.
  `self.selected_agent` / `self.selected_session` name the agent chosen in the Agents tab (shared
  by all views). Draw in `redraw()`; the base calls it on mount, after a resync (`Resynced`: the
  console reconnected and re-read every listing) and when the selection changes (`AgentSelected`).
- **News as messages.** The app forwards every `tui.messages` message to every mounted view:
  handle `on_lane_reported`, `on_locks_reported`, `on_approval_changed`, `on_session_changed`,
  `on_config_changed`, `on_secrets_changed`, `on_agents_updated`, `on_status_updated`,
  `on_connection_changed` as needed (update a row, not the whole table, when bursts are likely).
- **I/O only in workers.** Actions call choird through the bridge inside a `@work` method:

      @work(exclusive=True, group="approve")
      async def approve(self, approval_id: str) -> None:
          if await self.app.push_screen_wait(ConfirmDialog(f"Approve {approval_id}?")):
              await self.act("approval.approve", f"approved {approval_id}",
                             approval_id=approval_id, by="console")

  `self.act(verb, done, **payload)` calls `self.bridge.call(verb, **payload)` and notifies the
  result or choird's one-line refusal; use `self.bridge.call` directly to read answers.
  Streams (`session.events` follow, `logs`, `chat.replies`): `async for item in
  self.bridge.stream(verb, **payload)` in a worker; on `UnavailableError` await
  `self.bridge.wait_connected()` and reopen from the last item seen.
- **Confirmation** uses `tui.dialogs.ConfirmDialog` (a `ModalScreen[bool]`); every action also
  has a choirctl command (README table).
- **Keys and palette.** View `BINDINGS` work while focus is inside the view; show=True ones
  appear in the footer. `palette_commands()` returns `PaletteCommand`s for ctrl+p. Keys 1-9, 0
  switch tabs (app level), so views bind letters only.
- **Looks.** Lane-state colours come from `tui.widgets.lane_state` (`lane_style`); style in
  `tui/app.tcss` (one theme) or the view's `DEFAULT_CSS`. Views must fit 80x24 and never raise
  on a tiny terminal.
- **Tests.** `tests/tui/` pilot tests against a real choird (`tests/tui/conftest.py` fixtures
  `choird_home`, `console`); SVG snapshots with fixed size and data.

The registry
------------
`VIEWS` lists every tab in order. A view's module is imported lazily by `ViewSpec.load()`; while
it does not exist yet the tab shows a placeholder saying so.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from tui.views.base import ChoirView, PaletteCommand

__all__ = ["VIEWS", "ChoirView", "PaletteCommand", "ViewSpec", "spec"]


@dataclass(frozen=True)
class ViewSpec:
    """One tab: where its view class lives and the key that shows it."""

    view_id: str
    title: str
    module: str
    """`tui.views.<module>`, imported when the console starts."""
    cls: str
    """The `ChoirView` subclass in that module."""
    key: str
    """The app-level key that switches to the tab."""
    description: str
    """One line for the help screen and the command palette."""

    def load(self) -> type[ChoirView] | None:
        """The view class, or None while its module is not written yet."""
        name = f"tui.views.{self.module}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name == name:
                return None
            raise
        view: type[ChoirView] = getattr(module, self.cls)
        return view


VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec("agents", "Agents", "agents", "AgentsView", "1",
             "agents: state, runtime, session, uptime; start, stop, restart"),
    ViewSpec("lanes", "Lanes", "lanes", "LanesView", "2",
             "the selected agent's edge and core lanes: state, step, skill, budgets"),
    ViewSpec("locks", "Locks", "locks", "LocksView", "3",
             "the selected agent's lock table: resource, mode, holders, waiters"),
    ViewSpec("cores", "Cores", "cores", "CoresView", "4",
             "the selected agent's core jobs: state, step, latest event; inject, cancel"),
    ViewSpec("events", "Events", "events", "EventsView", "5",
             "the live event timeline across edge and cores; filter, pause, jump, expand"),
    ViewSpec("approvals", "Approvals", "approvals", "ApprovalsView", "6",
             "pending approvals with countdown; approve or reject"),
    ViewSpec("chat", "Chat", "chat", "ChatView", "7",
             "the console DM with the selected agent; /inject"),
    ViewSpec("logs", "Logs", "logs", "LogsView", "8",
             "choird's and the selected agent's log tails"),
    ViewSpec("config", "Config", "config", "ConfigView", "9",
             "staged vs running config; load and apply"),
    ViewSpec("workspaces", "Workspaces", "workspaces", "WorkspacesView", "0",
             "workspace leases; reset"),
)  # fmt: skip
"""Every tab, in order. Agents..Events are part A of issue 7, the rest part B."""


def spec(view_id: str) -> ViewSpec:
    """The registry entry of `view_id` (KeyError when there is none)."""
    for entry in VIEWS:
        if entry.view_id == view_id:
            return entry
    raise KeyError(view_id)
