"""REPORT_STATUS (§12.5): each lane's latest state, budgets left and held calls, told to choird.

A lane moves several times per model call (reasoning, waiting on a tool, back), and one RPC per
move cost both sides more than the link's heartbeats did. choird keeps only the latest report
of each lane (`StatusBoard`: status is news, the log is the history), so a state that another
one replaced before it was sent carries nothing anyone reads. Reports are therefore coalesced
per lane: the first after a quiet spell goes at once, and while the lanes keep moving, each
lane's latest report goes at most every `STATUS_COALESCE_S` — never lost, only late by that
much (`close()` sends what is left). A changed lock table rides on the next report sent.

choird keeps lane states, held calls and budgets only in memory: whenever the connection to
choird is established again (a lost channel, a restarted choird adopting this agent), every
lane's latest report and the lock table are sent again at once (`resend`), so `status` does
not go blank until each lane happens to move.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from choir.agent.kernel.lock_report import LockWatch
from choir.agent.kernel.locks import LockManager
from choir.agent.lanes.budget_follow import Remaining, changed
from choir.agent.replication.control_plane import ControlPlane
from choir.logs import get_logger
from choir.protocol import LockState, ReportStatusRequest
from choir.protocol.log.lanes import EDGE_LANE

log = get_logger("choir.agent.status")

STATUS_COALESCE_S: Final = 0.05
"""Least time between two sends while lanes keep moving: an operator cannot see faster than
this, and a burst of moves within it costs one report per lane."""
CLOSE_PATIENCE_S: Final = 2.0
"""How long `close()` waits for the last reports to be sent."""


class StatusReporter:
    """Sends each lane's latest report to choird, coalesced, without blocking the lane."""

    def __init__(self, control_plane: ControlPlane, *, coalesce_s: float = STATUS_COALESCE_S):
        self._cp = control_plane
        self._coalesce_s = coalesce_s
        self._latest: dict[str, ReportStatusRequest] = {}
        """Each lane's last report, without a lock table: what `resend` and `refresh` send."""
        self._unsent: dict[str, ReportStatusRequest] = {}
        """Reports not sent yet, one per lane (the newest), in the order lanes first moved."""
        self._pending_locks: list[LockState] | None = None
        """A lock table for the next report sent."""
        self._locks: list[LockState] | None = None
        """The last lock table reported, for `resend`."""
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        """Set while every report was sent (or failed): what `close()` waits for."""
        self._idle.set()
        self._closing = False
        self._quiet = False
        """While the task waits out the quiet window after a send (`_nudge`)."""
        self._task: asyncio.Task[None] | None = None
        self._lock_watch: LockWatch | None = None
        self._unsubscribe = control_plane.on_connected(self.resend)

    def report(self, request: ReportStatusRequest) -> None:
        """Queue `request` as its lane's latest state (it replaces one not sent yet)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="status")
        # frozen models: the request itself is the latest unless it carries a lock table
        latest = request if request.locks is None else request.model_copy(update={"locks": None})
        self._latest[request.lane] = latest
        self._unsent.pop(request.lane, None)  # keeps lanes in the order of their latest move
        self._unsent[request.lane] = request
        self._idle.clear()
        self._nudge()

    def refresh(self, remaining: Remaining, force: bool = False) -> None:
        """Send each lane's latest report again with its budgets left now, where they changed
        (or always, when `force`): `agent status` must never show a stale figure."""
        for lane, latest in list(self._latest.items()):
            left = remaining(lane)
            if left is None or not (force or changed(latest.budget_remaining, left)):
                continue
            self.report(latest.model_copy(update={"budget_remaining": dict(left)}))

    def report_locks(self, locks: list[LockState]) -> None:
        """Send the agent's lock table (it changed) with the edge lane's latest report."""
        self._pending_locks = self._locks = locks
        latest = self._latest.get(EDGE_LANE) or next(iter(self._latest.values()), None)
        if latest is not None and latest.lane not in self._unsent:
            self.report(latest)
        elif latest is not None:
            self._nudge()

    def resend(self) -> None:
        """Send every lane's latest report again — held calls and budgets left included — and
        the lock table with the first: the connection to choird was just (re)established."""
        if self._locks is not None:
            self._pending_locks = self._locks
        for latest in list(self._latest.values()):
            self.report(latest)

    def watch_locks(self, locks: LockManager) -> None:
        """Report `locks`' table whenever it changes, until `close()`."""
        if self._lock_watch is None:
            self._lock_watch = LockWatch(locks, self.report_locks)
            self._lock_watch.start()

    def _nudge(self) -> None:
        """Wake the task for what was queued, unless it is waiting out the quiet window: it
        sends everything queued when that ends, and a wake per lane move meanwhile (several
        per model call) only cost a loop turn each."""
        if not self._quiet:
            self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sent_at = -self._coalesce_s
        while True:
            await self._wake.wait()
            quiet_until = sent_at + self._coalesce_s
            if not self._closing and loop.time() < quiet_until:
                self._quiet = True
                try:
                    with contextlib.suppress(TimeoutError):  # close() cuts the wait short
                        async with asyncio.timeout_at(quiet_until):
                            await self._until_closing()
                finally:
                    self._quiet = False
            self._wake.clear()
            sent_at = loop.time()
            await self._send_unsent()
            if not self._unsent:
                self._idle.set()

    async def _until_closing(self) -> None:
        while not self._closing:
            self._wake.clear()
            await self._wake.wait()

    async def _send_unsent(self) -> None:
        """Send every lane's report not sent yet (the lock table with the first); what comes
        in meanwhile waits for the next window."""
        unsent, self._unsent = self._unsent, {}
        for lane, request in unsent.items():
            if self._pending_locks is not None:
                request = request.model_copy(update={"locks": self._pending_locks})
                self._pending_locks = None
            try:
                await self._cp.report_status(request)
            except Exception as exc:  # status is advisory: the log is the authority
                log.warning("status report failed", fields={"lane": lane, "error": str(exc)})

    async def close(self) -> None:
        """Send what is not sent yet (briefly), then stop."""
        self._unsubscribe()
        if self._lock_watch is not None:
            await self._lock_watch.close()
            self._lock_watch = None
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_PATIENCE_S):
                    await self._idle.wait()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["STATUS_COALESCE_S", "StatusReporter"]
