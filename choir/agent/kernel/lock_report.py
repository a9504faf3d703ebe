"""Lock-table reports: the agent's §9 lock table, sent to choird whenever it changes.

The lock manager stays free of reporting hooks (its hot path is one table step per call); a
watcher looks at `LockManager.snapshot()` every `LOCK_WATCH_S` — an in-memory scan, no I/O — and
hands a changed table to the status reporter, which sends it with the next REPORT_STATUS. A lock
held for less than the watch period may never be shown: the operator could not have seen it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Final

from choir.agent.kernel.locks import LockManager
from choir.core.locks.table import LockInfo
from choir.protocol import LockState, LockWaiter

LOCK_WATCH_S: Final = 0.2
"""How often the watcher compares the lock table with the one last reported."""


def lock_states(table: list[LockInfo], now: float) -> list[LockState]:
    """The wire form of a snapshot; ages are seconds as of `now` (monotonic)."""
    return [
        LockState(
            resource=info.resource,
            mode=info.mode,
            holders=list(info.holders),
            waiters=[
                LockWaiter(owner=wait.owner, mode=wait.mode, waiting_s=_age(wait.since, now))
                for wait in info.waiters
            ],
            held_for_s=None if info.held_since is None else _age(info.held_since, now),
        )
        for info in table
    ]


def _age(since: float, now: float) -> float:
    return round(max(now - since, 0.0), 3)


class LockWatch:
    """Calls `send(table)` each time the lock table differs from the one last sent."""

    def __init__(
        self,
        locks: LockManager,
        send: Callable[[list[LockState]], None],
        *,
        period_s: float = LOCK_WATCH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._locks = locks
        self._send = send
        self._period_s = period_s
        self._clock = clock
        self._last: list[LockInfo] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lock watch")

    def check(self) -> bool:
        """Send the table if it changed since the last send; whether it did."""
        table = self._locks.snapshot()
        if table == self._last:
            return False
        self._last = table
        self._send(lock_states(table, self._clock()))
        return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._period_s)
            self.check()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
