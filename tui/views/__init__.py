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
  result or choird's one-line refusal; read an answer as its model with
  `await self.bridge.ask(OperatorVerb.X, Model, **payload)` (`choir.protocol.operator`).
  Streams (`session.events` follow, `logs`, `chat.replies`): `async for item in
  self.bridge.items(OperatorVerb.X, **payload)` in a worker — items parsed once, a tagged union
  matched by class; on `UnavailableError` await `self.bridge.wait_connected()` and reopen from
  the last item seen.
- **Confirmation** uses `tui.dialogs.ConfirmDialog` (a `ModalScreen[bool]`); every action also
  has a choirctl command (README table).
- **Keys and palette.** View `BINDINGS` work while focus is inside the view; show=True ones
  appear in the footer. `palette_commands()` returns `PaletteCommand`s for ctrl+p. Keys 1-9, 0,
  `m` (Memory), `w` (Gateways) and `b` (Inbox) switch tabs (app level), so views bind other
  letters only.
- **Looks.** Lane-state colours come from `tui.widgets.lane_state` (`lane_style`); style in
  `tui/app.tcss` (one theme) or the view's `DEFAULT_CSS`. Views must fit 80x24 and never raise
  on a tiny terminal.
- **Tests.** `tests/tui/` pilot tests against a real choird (`tests/tui/conftest.py` fixtures
  `choird_home`, `console`); SVG snapshots with fixed size and data.

The registry
------------
`VIEWS` lists every tab in order, with its view class.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.views.agents import AgentsView
from tui.views.approvals import ApprovalsView
from tui.views.base import ChoirView, ConsoleHost, PaletteCommand
from tui.views.chat import ChatView
from tui.views.config import ConfigView
from tui.views.cores import CoresView
from tui.views.events import EventsView
from tui.views.gateways import GatewaysView
from tui.views.inbox import InboxView
from tui.views.lanes import LanesView
from tui.views.locks import LocksView
from tui.views.logs import LogsView
from tui.views.memory import MemoryView
from tui.views.usage import UsageView
from tui.views.workspaces import WorkspacesView

__all__ = ["VIEWS", "ChoirView", "ConsoleHost", "PaletteCommand", "ViewSpec", "spec"]


@dataclass(frozen=True)
class ViewSpec:
    """One tab: its view class and the key that shows it."""

    view_id: str
    title: str
    view: type[ChoirView]
    """The `ChoirView` subclass the tab shows."""
    key: str
    """The app-level key that switches to the tab."""
    description: str
    """One line for the help screen and the command palette."""


VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec("agents", "Agents", AgentsView, "1",
             "agents: state, runtime, session, uptime; start, stop, restart"),
    ViewSpec("lanes", "Lanes", LanesView, "2",
             "the selected agent's edge and core lanes: state, step, skill, budgets"),
    ViewSpec("locks", "Locks", LocksView, "3",
             "the selected agent's lock table: resource, mode, holders, waiters"),
    ViewSpec("cores", "Cores", CoresView, "4",
             "the selected agent's core jobs: state, step, latest event; inject, cancel"),
    ViewSpec("events", "Events", EventsView, "5",
             "the live event timeline across edge and cores; filter, pause, jump, expand"),
    ViewSpec("approvals", "Approvals", ApprovalsView, "6",
             "pending approvals with countdown; approve or reject"),
    ViewSpec("chat", "Chat", ChatView, "7",
             "the console DM with the selected agent; /inject"),
    ViewSpec("logs", "Logs", LogsView, "8",
             "choird's and the selected agent's log tails"),
    ViewSpec("config", "Config", ConfigView, "9",
             "staged vs running config; load and apply"),
    ViewSpec("workspaces", "Workspaces", WorkspacesView, "0",
             "workspace leases; reset"),
    ViewSpec("memory", "Memory", MemoryView, "m",
             "the selected agent's memory: stats, search, knowledge, an item's source events"),
    ViewSpec("gateways", "Gateways", GatewaysView, "w",
             "the console DM and Telegram bots: state, last update, DMs and agents, sends"),
    ViewSpec("usage", "Usage", UsageView, "u",
             "LLM calls and cost per agent per day, costliest jobs, spend against caps"),
    ViewSpec("inbox", "Inbox", InboxView, "b",
             "what waits for a decision after a restart (not DM messages); decide"),
)  # fmt: skip
"""Every tab, in order."""


def spec(view_id: str) -> ViewSpec:
    """The registry entry of `view_id` (KeyError when there is none)."""
    for entry in VIEWS:
        if entry.view_id == view_id:
            return entry
    raise KeyError(view_id)
