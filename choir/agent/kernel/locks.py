"""The lock manager of choir-agent: §9 locks for edge and concurrent core jobs, on asyncio.

choir runs tool executions concurrently (DESIGN-NOTES "Concurrency"), so every tool call takes its
lockset here:

    async with manager.hold("core:refactor-auth", Lockset.of("file:src/auth.py:X")):
        ...  # run the tool

The rules live in the pure `LockTable`; this module parks waiters on futures and wakes them.
Single-threaded asyncio is §9.4's "one mutex": no table operation spans an await, so a grant is
checked and applied in one step. An uncontended grant creates no future at all.

Locks are released on every exit path: normal, exception, `asyncio.timeout`, and task
cancellation — also while waiting, including the race where the grant lands just as the
cancellation arrives (the grant is handed straight back).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import final

from choir.core.locks.lockset import Lockset, LockUsageError, Mode
from choir.core.locks.table import LockInfo, LockTable, Waiter

__all__ = ["Hold", "LockManager", "LocksRevokedError"]


class LocksRevokedError(LockUsageError):
    """Raised in a waiter whose owner's locks were dropped by `release_all` (job cancelled)."""


@final
class LockManager:
    """One lock table and its FIFO wait queue, shared by edge and every core job."""

    __slots__ = ("_epochs", "_futures", "_table")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._table = LockTable(clock)
        self._futures: dict[Waiter, asyncio.Future[None]] = {}
        """Futures of queued waiters; a waiter is here exactly while it is queued."""
        self._epochs: dict[str, int] = {}
        """owner -> how many times `release_all` ran for it; a hold from an older epoch is
        already released and must not release again."""

    def hold(self, owner: str, lockset: Lockset) -> Hold:
        """`async with manager.hold(owner, lockset):` holds the whole lockset inside the block."""
        return Hold(self, owner, lockset)

    async def acquire(self, owner: str, lockset: Lockset) -> Hold:
        """Acquire outside an `async with`; call `release()` on the result when done."""
        return await Hold(self, owner, lockset).acquire()

    def release_all(self, owner: str) -> None:
        """Drop every lock of `owner` and fail its queued requests (a cancelled core job).

        Holds of `owner` that are still open become no-ops when they exit.
        """
        self._epochs[owner] = self._epochs.get(owner, 0) + 1
        withdrawn, granted = self._table.release_all(owner)
        for waiter in withdrawn:
            future = self._futures.pop(waiter)
            if not future.done():
                future.set_exception(
                    LocksRevokedError(f"locks of {owner} were released: the job was cancelled")
                )
        self._settle(granted)

    def snapshot(self) -> list[LockInfo]:
        """Every held or awaited resource with holders, waiters and held-since (status, TUI)."""
        return self._table.snapshot()

    def holders_of(self, owner: str) -> dict[str, Mode]:
        """The resources `owner` holds, with their modes."""
        return self._table.holders_of(owner)

    @property
    def idle(self) -> bool:
        """Nothing held and nobody waiting."""
        return self._table.idle

    @property
    def waiting(self) -> int:
        """How many requests are queued."""
        return len(self._futures)

    def _epoch(self, owner: str) -> int:
        return self._epochs.get(owner, 0) if self._epochs else 0

    async def _wait(self, waiter: Waiter, epoch: int) -> None:
        """Park until `_settle` grants the waiter; on any exception leave nothing behind."""
        future = asyncio.get_running_loop().create_future()
        self._futures[waiter] = future
        try:
            await future
        except BaseException:
            if self._futures.pop(waiter, None) is not None:
                self._settle(self._table.withdraw(waiter))
            elif future.done() and not future.cancelled() and future.exception() is None:
                self._release(waiter.owner, waiter.lockset, epoch)
            raise

    def _release(self, owner: str, lockset: Lockset, epoch: int) -> None:
        if self._epoch(owner) == epoch:
            self._settle(self._table.release(owner, lockset))

    def _settle(self, granted: Sequence[Waiter]) -> None:
        """Resolve the futures of granted waiters; a waiter whose task is gone gives back."""
        while granted:
            returned: list[Waiter] = []
            for waiter in granted:
                future = self._futures.pop(waiter)
                if future.cancelled():
                    returned.extend(self._table.release(waiter.owner, waiter.lockset))
                else:
                    future.set_result(None)
            granted = returned


@final
class Hold:
    """One lockset held by one owner; an async context manager, released exactly once."""

    __slots__ = ("_epoch", "_manager", "lockset", "owner", "waited")

    def __init__(self, manager: LockManager, owner: str, lockset: Lockset) -> None:
        self._manager = manager
        self.owner = owner
        self.lockset = lockset
        self._epoch = -1
        """The owner's release_all epoch at grant time; -1 while not held."""
        self.waited = False
        """Whether the grant had to wait: others ran meanwhile (and may have moved paths)."""

    @property
    def held(self) -> bool:
        return self._epoch >= 0

    async def acquire(self) -> Hold:
        """Wait until the whole lockset is granted; holds nothing while waiting."""
        if self._epoch >= 0:
            raise LockUsageError(f"{self.owner} already holds {self.lockset!r} through this hold")
        manager = self._manager
        epoch = manager._epoch(self.owner)
        waiter = manager._table.acquire(self.owner, self.lockset)
        if waiter is not None:
            await manager._wait(waiter, epoch)
            self.waited = True
        self._epoch = epoch
        return self

    __aenter__ = acquire

    def release(self) -> None:
        """Give the lockset back; a no-op if already released (or revoked by release_all)."""
        epoch = self._epoch
        if epoch >= 0:
            self._epoch = -1
            self._manager._release(self.owner, self.lockset, epoch)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
