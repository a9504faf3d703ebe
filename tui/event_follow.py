"""Follows the selected agent's session events and posts them to the console in batches.

One `session.events` follow stream for the selected session, in a worker: items are gathered
and posted as one `EventsArrived` per `1 / FLUSH_HZ` s, so a flood of events costs the UI one
message per frame, never one per event. When choird goes away the worker waits for the bridge
to reconnect and reopens the stream from the revision after the last one it saw; selecting
another agent replaces the worker (exclusive group).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from choir.errors import ChoirError, NotFoundError, UnavailableError
from choir.protocol.operator.verbs import OperatorVerb

if TYPE_CHECKING:
    from textual.app import App
    from textual.worker import Worker

    from choir.protocol.operator.views import EventView
    from tui.bridge import ChoirBridge

from tui.messages import EventsArrived

FLUSH_HZ: Final = 30
"""Batches per second at most (the event view redraws no faster)."""
SNAPSHOT: Final = 500
"""Events read back when a stream opens on a session for the first time."""


class EventFollower:
    """Keeps one follow stream open for `session_id`; `follow(None)` stops following."""

    def __init__(self, app: App[Any], bridge: ChoirBridge) -> None:
        self.app = app
        self.bridge = bridge
        self.session_id: str | None = None
        self.worker: Worker[None] | None = None
        """The worker following `session_id`, if any."""
        self.next_rev: int | None = None
        """The revision the stream resumes from (None: the last `SNAPSHOT`)."""

    def follow(self, session_id: str | None) -> None:
        """Follow `session_id` (restarting from its tail), or stop when None."""
        if session_id == self.session_id:
            return
        self.session_id, self.next_rev = session_id, None
        if session_id is None:
            self.app.workers.cancel_group(self.app, "events")
            return
        worker: Worker[None] = self.app.run_worker(
            partial(self._run, session_id), group="events", exclusive=True
        )
        self.worker = worker

    async def _run(self, session_id: str) -> None:
        while True:
            await self.bridge.wait_connected()
            try:
                await self._stream(session_id)
                return  # the session ended and its last events were sent
            except NotFoundError:
                return
            except (UnavailableError, ConnectionError):
                await asyncio.sleep(0.2)  # choird went away: the bridge reconnects
            except ChoirError:
                await asyncio.sleep(1.0)

    async def _stream(self, session_id: str) -> None:
        """Read the stream; a flusher task posts what was gathered, `FLUSH_HZ` times a second."""
        batch: list[EventView] = []
        restart = self.next_rev is None

        async def flush_periodically() -> None:
            nonlocal batch, restart
            while True:
                await asyncio.sleep(1 / FLUSH_HZ)
                if batch:
                    self._post(session_id, batch, restart)
                    batch, restart = [], False

        flusher = asyncio.create_task(flush_periodically())
        try:
            async for event in self.bridge.items(
                OperatorVerb.SESSION_EVENTS,
                session_id=session_id,
                follow=True,
                from_rev=self.next_rev,
                limit=SNAPSHOT,
            ):
                batch.append(event)
                self.next_rev = event.rev + 1
        finally:
            flusher.cancel()
            if batch:
                self._post(session_id, batch, restart)

    def _post(self, session_id: str, events: list[EventView], restart: bool) -> None:
        self.app.post_message(EventsArrived(session_id, events, restart))
