"""What the bridge tells the console: small dataclass messages, one per kind of news.

The bridge (`tui.bridge`) posts these to the app; the app folds them into `ConsoleState` and
forwards a copy to every mounted view (`ChoirApp.forward`), so a view reacts with an ordinary
`on_<message>` handler (`on_lane_reported`, `on_approval_changed`…). Data are the operator API's
models (`choir.protocol.operator`), a feed item's the same as a listing's row, so a view draws a
row from a feed item with the same code that drew it from a listing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from textual.message import Message

if TYPE_CHECKING:
    from choir.protocol.operator import items as i
    from choir.protocol.operator.answers import StatusAnswer
    from choir.protocol.operator.views import (
        AgentSummary,
        ApprovalView,
        EventView,
        LaneView,
        LocksView,
        SessionEndedView,
    )


class ConsoleNews(Message, bubble=False):
    """Base of every message the app forwards to the views. It does not bubble: a copy posted
    to a view must not travel back up to the app."""


ConnectionState = Literal["connecting", "connected", "disconnected", "not_running", "denied"]
"""`connecting` at start; `connected` while the feed runs; `disconnected` after choird went away
(retrying); `not_running` when no choird listens (retrying); `denied` when the socket refuses us."""


@dataclass
class ConnectionChanged(ConsoleNews):
    """The bridge's link to choird changed state; `detail` is the one-line reason."""

    state: ConnectionState
    detail: str = ""
    retry_in_s: float | None = None
    """Seconds until the next attempt, while not connected."""


@dataclass
class Resynced(ConsoleNews):
    """Listings were (re-)read after (re)subscribing: views redraw from `ConsoleState`."""


@dataclass
class StatusUpdated(ConsoleNews):
    """choird's `status` answer (Postgres, gateways, agents running, config version)."""

    status: StatusAnswer


@dataclass
class AgentsUpdated(ConsoleNews):
    """`agent.list`'s agents, read again (after start/stop, or a session starting or ending)."""

    agents: list[AgentSummary]


@dataclass
class SessionChanged(ConsoleNews):
    """A feed `session` item: a session became active or ended."""

    data: SessionEndedView


@dataclass
class ApprovalChanged(ConsoleNews):
    """A feed `approval` item: an approval was requested or resolved."""

    data: ApprovalView


@dataclass
class LaneReported(ConsoleNews):
    """A feed `lane` item: one lane's latest REPORT_STATUS (as `session cores` shows a lane)."""

    data: LaneView


@dataclass
class LocksReported(ConsoleNews):
    """A feed `locks` item: a session's lock table (`session.locks`)."""

    data: LocksView


@dataclass
class ConfigChanged(ConsoleNews):
    """A feed `config` item: config_version changed (data: config_version, reason)."""

    data: i.ConfigChanged


@dataclass
class SecretsChanged(ConsoleNews):
    """A feed `secrets` item: secrets were applied (data: changed)."""

    data: i.SecretsChanged


@dataclass
class AgentSelected(ConsoleNews):
    """The operator selected another agent; views showing one agent switch to it."""

    agent_id: str | None
    session_id: str | None


@dataclass
class EventsArrived(ConsoleNews):
    """A batch of the selected session's committed events (`session.events` follow), in rev
    order. Batches are coalesced to at most `tui.event_follow.FLUSH_HZ` a second."""

    session_id: str
    events: list[EventView]
    restart: bool = False
    """True for the first batch of a (re)opened stream: a view drops what it had of other
    sessions and fills any gap since the last rev it holds."""
