"""Long operator verbs as streams: progress items while the work runs, then its result.

A build can take minutes; the client shows each step as it happens instead of waiting on one
answer. The work runs in its own task, not in the stream: a client that goes away stops
reading, never the work — an update half-way between stop and start must finish either way.

Items (`choir.protocol.operator.items`): `Progress` any number of times, then one result item
(`{kind: "result", result: {…}}`); a refusal of the work arrives as the stream's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Final, TypeVar

from choir.logs import get_logger
from choir.protocol.base import WireModel
from choir.protocol.operator.items import Progress

log = get_logger("choird.operator")

Report = Callable[[Progress], None]
"""Publish one progress item."""

T = TypeVar("T")

_RUNNING: Final[set[asyncio.Task[Any]]] = set()
"""Work whose reader left; kept referenced until it finishes."""


async def reporting(
    work: Callable[[Report], Coroutine[Any, Any, T]], result: Callable[[T], WireModel]
) -> AsyncIterator[WireModel]:
    """Run `work` in its own task; stream what it reports, then `result` of what it returns."""
    queue: asyncio.Queue[Progress | None] = asyncio.Queue()
    task = asyncio.create_task(work(queue.put_nowait))
    _RUNNING.add(task)
    task.add_done_callback(_finished)
    task.add_done_callback(lambda _: queue.put_nowait(None))  # after every report
    while (item := await queue.get()) is not None:
        yield item
    yield result(task.result())


def _finished(task: asyncio.Task[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        error = task.exception()
        log.info("operator work ended with an error", fields={"error": str(error)})
