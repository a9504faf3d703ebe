"""`subscribe`: the live updates a console (the TUI) redraws from, as `{kind, data}` items
(`choir.protocol.operator.items.FeedItem`).

The feed listens to choird's services once — sessions ending, approvals resolved, lane reports —
and fans each update out to every attached reader; the operator verbs that change config
publish `config` items themselves. Kinds:

- `subscribed` — first item of every stream: the reader is attached (data: config_version).
- `session`    — a session ended (data: session_id, agent_id, status, reason); whoever starts
                 sessions publishes `session` items with status `active` through `publish`.
- `approval`   — an approval was requested or resolved (data: the approval as `approval show`).
- `lane`       — a lane reported its state (data: as `session cores` shows a lane).
- `locks`      — an agent's lock table changed (data: as `session locks` shows it).
- `config`     — config_version changed (data: config_version, reason).
- `secrets`    — secrets were applied (data: changed).

A reader that falls `backlog` items behind is cut off with `unavailable` rather than letting
choird's memory grow; it subscribes again and re-reads the listings.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Final

from choir.daemon.agents.services import AgentServices
from choir.daemon.agents.status_board import LaneReport, LockReport
from choir.daemon.operator.views import (
    approval_view,
    lane_view,
    locks_view,
    session_ended_view,
)
from choir.daemon.sessions.state import SessionEnded
from choir.protocol import ErrorCode
from choir.protocol.operator.items import (
    ApprovalItem,
    FeedItem,
    LaneItem,
    LocksItem,
    SessionItem,
    Subscribed,
    SubscribedItem,
)
from choir.store.approvals.pending import ApprovalRow
from choir.transport import RpcError

DEFAULT_BACKLOG: Final = 1000
"""Updates a reader may fall behind before it is cut off."""


class OperatorFeed:
    """Fan-out of operator-visible changes to every attached `subscribe` stream."""

    def __init__(self, *, backlog: int = DEFAULT_BACKLOG) -> None:
        self._backlog = backlog
        self._readers: set[asyncio.Queue[FeedItem | None]] = set()

    @property
    def reader_count(self) -> int:
        return len(self._readers)

    def attach(self, services: AgentServices) -> Callable[[], None]:
        """Listen to the services; returns the callable that stops listening."""
        stops = [
            services.sessions.subscribe(self._session_ended),
            services.approvals.subscribe(self.approval),
            services.approvals.subscribe_requests(self.approval),
            services.status.subscribe(self._lane),
            services.status.subscribe_locks(self._locks),
        ]

        def detach() -> None:
            for stop in stops:
                stop()

        return detach

    def publish(self, item: FeedItem) -> None:
        """Send `item` to every reader; a reader too far behind is cut off."""
        for reader in tuple(self._readers):
            try:
                reader.put_nowait(item)
            except asyncio.QueueFull:
                self._readers.discard(reader)
                while not reader.empty():
                    reader.get_nowait()
                reader.put_nowait(None)  # in place of the backlog: "you were cut off"

    def approval(self, row: ApprovalRow) -> None:
        """Publish an approval that was requested or resolved."""
        self.publish(ApprovalItem(data=approval_view(row)))

    async def items(self, config_version: int) -> AsyncIterator[FeedItem]:
        """One reader's stream; it detaches when the reader goes away (the generator closes)."""
        reader: asyncio.Queue[FeedItem | None] = asyncio.Queue(maxsize=self._backlog)
        self._readers.add(reader)
        try:
            yield SubscribedItem(data=Subscribed(config_version=config_version))
            while (item := await reader.get()) is not None:
                yield item
            raise RpcError(
                ErrorCode.UNAVAILABLE,
                f"the reader fell {self._backlog} updates behind: subscribe again",
            )
        finally:
            self._readers.discard(reader)

    def _session_ended(self, ended: SessionEnded) -> None:
        self.publish(SessionItem(data=session_ended_view(ended)))

    def _lane(self, session_id: str, lane: LaneReport) -> None:
        self.publish(LaneItem(data=lane_view(session_id, lane)))

    def _locks(self, session_id: str, table: LockReport) -> None:
        self.publish(LocksItem(data=locks_view(session_id, table)))
