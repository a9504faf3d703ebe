"""Long operator verbs as streams: progress items while the work runs, then its result.

A build can take minutes; the client shows each step as it happens instead of waiting on one
answer. The work runs in its own task, not in the stream: a client that goes away stops
reading, never the work — an update half-way between stop and start must finish either way.

Items: `{kind: "progress", …}` any number of times, then one `{kind: "result", result: {…}}`;
a refusal of the work arrives as the stream's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Final

from choir.logs import get_logger
from choir.transport import Payload

log = get_logger("choird.operator")

Report = Callable[[dict[str, Any]], None]
"""Publish one progress item (its `kind` is added)."""
Work = Callable[[Report], Coroutine[Any, Any, dict[str, Any]]]

_RUNNING: Final[set[asyncio.Task[dict[str, Any]]]] = set()
"""Work whose reader left; kept referenced until it finishes."""


async def reporting(work: Work) -> AsyncIterator[Payload]:
    """Run `work` in its own task; stream what it reports, then its result."""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def report(item: dict[str, Any]) -> None:
        queue.put_nowait({"kind": "progress", **item})

    task = asyncio.create_task(work(report))
    _RUNNING.add(task)
    task.add_done_callback(_finished)
    task.add_done_callback(lambda _: queue.put_nowait(None))  # after every report
    while (item := await queue.get()) is not None:
        yield item
    yield {"kind": "result", "result": task.result()}


def _finished(task: asyncio.Task[dict[str, Any]]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        error = task.exception()
        log.info("operator work ended with an error", fields={"error": str(error)})
