"""Tool-call rows (`core.memory.tool_synthesis`) for closed sessions: at close, and backfilled.

    rows = session_tool_rows(session)                 # at close (`SessionCloser.close_one`)
    backfill = ToolRowBackfill(pool, store, index, closer.lock)
    run = await backfill.run("ada", progress=...)    # `choirctl memory backfill-tools`

Every closed session's tool calls get one past-tense sentence each, stored as rows of the
session (`choir.store.memory.tool_rows`) and queued for vectors when mid-term. Sessions closed
before this existed have none: the backfill reads each closed session with tool results and no
rows for all of them yet (a session resumed and closed again since has rows for its later part
only), one at a time under the closer's lock (a promotion moving the session's rows to
`long_term_detail` never races it), and stores its rows in the tier its chunks are in. Running it
again stores nothing (the rows are keyed); a backfill cut short (choird killed, Postgres gone)
resumes with the sessions it had not reached. Every row's text passes choird's secret redaction,
as chunks do.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import choir
from choir.core.memory.chunks import MemoryChunk, Tier
from choir.core.memory.tool_synthesis import tool_rows
from choir.daemon.memory.closing.chunks import StoredSession, read_session
from choir.daemon.memory.embedding.index import MemoryIndex
from choir.daemon.memory.store import MemoryStore
from choir.failpoints import failpoint
from choir.logs import get_logger, redact
from choir.store.memory.chunks import ChunkRef
from choir.store.memory.tool_rows import sessions_with_tool_results, undescribed
from choir.store.postgres.pool import Pool

_log = get_logger("choir.memory")

Progress = Callable[[int, int], Awaitable[None]]
"""(sessions done, sessions to do), after each session."""


@functools.cache
def masked_tools() -> frozenset[str]:
    """The built-in tools whose manifests set `prompt_mask` (§8.5): their rows never read a
    result's data. Other tools' rows use the generic sentence, which reads none either."""
    root = Path(choir.__file__).resolve().parent / "_seeds" / "global" / "tools"
    masked = set()
    for path in sorted(root.glob("*.json")):
        try:
            manifest = json.loads(path.read_text())
            if manifest["runtime"].get("prompt_mask") is True:
                masked.add(manifest["llm"]["name"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a seed that does not parse is caught by the seed tests, not here
    return frozenset(masked)


def session_tool_rows(session: StoredSession) -> list[MemoryChunk]:
    """The session's tool-call rows, redacted like its chunks."""
    rows = tool_rows(session.events, masked=masked_tools())
    return [
        row if (text := redact(row.text)) == row.text else replace(row, text=text) for row in rows
    ]


def index_rows(index: MemoryIndex, agent_id: str, refs: list[ChunkRef]) -> None:
    """Queue the mid-term rows for vectors (a promoted session's detail gets none)."""
    for ref in refs:
        if ref.tier is Tier.MID_TERM:
            index.index(agent_id, "memory", ref.id, ref.text)


@dataclass(frozen=True, slots=True)
class BackfillRun:
    """What one agent's backfill did."""

    agent_id: str
    sessions: int
    """Sessions that got their rows by this run."""
    rows: int
    """Rows stored by this run."""
    already: int
    """Closed sessions with tool calls that had all their rows before this run."""


class ToolRowBackfill:
    """Gives the closed sessions of an agent the tool-call rows they lack."""

    def __init__(self, pool: Pool, store: MemoryStore, index: MemoryIndex, lock: asyncio.Lock):
        self._pool = pool
        self._store = store
        self._index = index
        self._lock = lock
        """The closer's: one close, promotion or session backfill at a time."""

    async def run(self, agent_id: str, progress: Progress | None = None) -> BackfillRun:
        """Backfill the agent's closed sessions without rows, oldest close first."""
        async with self._pool.acquire() as conn:
            closed = await sessions_with_tool_results(conn, agent_id)
        described = await self._store.described_sessions(agent_id)
        todo = [s.session_id for s in undescribed(closed, described)]
        stored = 0
        for done, session_id in enumerate(todo, start=1):
            async with self._lock:
                async with self._pool.acquire() as conn:
                    session = await read_session(conn, session_id)
                rows = await asyncio.to_thread(session_tool_rows, session)
                refs = await self._store.add_tool_rows(agent_id, session_id, rows)
            index_rows(self._index, agent_id, refs)
            stored += len(refs)
            await failpoint("memory.backfill_tools.after_session")
            if progress is not None:
                await progress(done, len(todo))
        if todo:
            _log.info(
                "memory: tool-call rows backfilled",
                fields={"agent_id": agent_id, "sessions": len(todo), "rows": stored},
            )
        return BackfillRun(agent_id, len(todo), stored, len(closed) - len(todo))
