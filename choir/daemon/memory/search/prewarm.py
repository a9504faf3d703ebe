"""The BM25 index of an agent's knowledge, built when its session starts (issue 15).

Without this the agent's first knowledge search builds it (`bm25_index`: about 2.9 s at 100k
items on a quiet machine). Each session start or resume schedules the build in the background —
the start never waits for it — and a search meanwhile waits on the index's lock for the build in
progress instead of starting its own. A failed build is logged and left to the first search.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from choir.logs import get_logger

_log = get_logger("choir.memory")


class Warmable(Protocol):
    async def warm_bm25(self, agent_id: str) -> None: ...


class Bm25Prewarm:
    """Builds an agent's BM25 index in a background task when one of its sessions starts."""

    def __init__(self, store: Warmable) -> None:
        self._store = store
        self._tasks: set[asyncio.Task[None]] = set()

    def session_started(self, session_id: str, agent_id: str) -> None:
        """A `SessionService.subscribe_started` listener: returns at once."""
        task = asyncio.get_running_loop().create_task(
            self._warm(agent_id), name=f"bm25-prewarm-{agent_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _warm(self, agent_id: str) -> None:
        try:
            await self._store.warm_bm25(agent_id)
        except Exception as exc:  # never the start's problem: the first search builds it
            _log.warning(
                "could not pre-build the BM25 index of an agent's knowledge",
                fields={"agent_id": agent_id, "error": f"{type(exc).__name__}: {exc}"},
            )

    async def settled(self) -> None:
        """Wait for the builds under way (each logs its own failure)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
