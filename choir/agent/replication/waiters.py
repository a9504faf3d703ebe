"""Callers waiting for choird's ack to reach a revision (durable intents, flushes)."""

from __future__ import annotations

import asyncio
import contextlib


class AckWaiters:
    """Futures keyed by revision; released as acks arrive, failed when replication ends."""

    def __init__(self) -> None:
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, rev: int, limit_s: float) -> None:
        """Until `release` covers `rev`; TimeoutError after `limit_s`, or what `fail` set."""
        waiter = asyncio.get_running_loop().create_future()
        entry = (rev, waiter)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(limit_s):
                await waiter
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def release(self, acked_rev: int) -> None:
        for rev, waiter in self._waiters:
            if rev <= acked_rev and not waiter.done():
                waiter.set_result(None)

    def fail(self, error: BaseException) -> None:
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
