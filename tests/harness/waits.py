"""Waits on state that has no event to wait on: poll a condition until it holds.

Prefer an event (a reply stream, a process's exit, a line of output) where there is one; these
are for state a test can only look at (a row in Postgres, a counter, a file).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def poll_until(
    condition: Callable[[], bool | Awaitable[bool]], within: float = 5.0, every: float = 0.02
) -> float:
    """Poll `condition` (plain or async) until true; the seconds it took. Fails the test after
    `within` s."""
    began = time.monotonic()
    while True:
        outcome = condition()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return time.monotonic() - began
        if time.monotonic() - began > within:
            raise AssertionError(f"condition not met within {within} s")
        await asyncio.sleep(every)


def wait_for(condition: Callable[[], bool], within: float, every: float = 0.1) -> float:
    """`poll_until` for code outside an event loop (blocking): the seconds it took."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > within:
            raise AssertionError(f"condition not met within {within} s")
        time.sleep(every)
    return time.monotonic() - began
