"""Session close (§11.8 steps 6-7, §17.2 step 6): an ended session's events become memory.

    closer = SessionCloser(pool, store, index, lambda: stage.running.config)
    closer.start()                                  # resumes every ended session not closed
    sessions.subscribe(closer.session_ended)        # each later end
    ...
    await closer.aclose()                           # at shutdown: bounded, resumed next start

In the background, one session at a time, oldest first: the session's events are read back,
chunked and stored as `mid_term` with one row per tool call (`tool_rows`: a past-tense sentence
each) and queued for vectors (`MemoryIndex`); then, while
the agent has more than `mid_term_sessions` mid-term sessions, the oldest is promoted — its
summary (none when it crashed) stored as `long_term_summary` and vectorized, its event chunks
turned `long_term_detail` without vectors. Every row is the session's user's (its bound DM):
only the agent's sessions of that user, and the operator, find it. The compaction archives
its events name and that are not stored yet are stored too, and its summary as the summary
tree's branch over them (`archives`), as that user's. A session is ended for memory when it
stopped or forked, or when it crashed or was suspended and its agent has started a newer
session since (`choir.store.memory.closes`).

Idempotent and resumable: `memory_closes` records `closing` with the chunk size before anything
is stored and `closed` after the promotions, every store step is idempotent, so a close cut
short by a kill, a Postgres restart or choird's shutdown is run again (with the same chunk size)
and stores nothing twice. Postgres being unavailable retries the close after a delay; any other
failure is logged with its session and retried at the next start — never choird's crash. Vectors
are not waited for: rows left without one are backfilled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Final, Protocol

from choir.core.memory.chunks import MemoryChunk, Tier
from choir.daemon.memory.closing.archives import store_session_tree
from choir.daemon.memory.closing.chunks import (
    StoredSession,
    event_chunks,
    read_session,
    read_summary,
    summary_chunks_of,
)
from choir.daemon.memory.closing.tool_rows import index_rows, session_tool_rows
from choir.daemon.memory.embedding.index import MemoryIndex
from choir.daemon.memory.store import MemoryStore
from choir.daemon.sessions.state import Clock, SessionEnded, utc_now
from choir.errors import UnavailableError
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.store.memory.chunks import ChunkRef
from choir.store.memory.closes import PendingClose, begin_close, finish_close, pending_closes
from choir.store.postgres.failures import classify
from choir.store.postgres.pool import Pool

_log = get_logger("choir.memory")

RETRY_S: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
"""Waits before retrying closes Postgres could not serve; the last repeats."""
SHUTDOWN_GRACE_S: Final = 2.0
"""How long choird's shutdown lets a close in progress finish before cancelling it."""
PAGE: Final = 100
"""Pending sessions read at a time."""
STORE_PAGE: Final = 500
"""Chunks stored per transaction: each page is queued for vectors while the next is stored."""
PROGRESS_EVERY: Final = 10
"""A backlog's progress is logged every this many sessions."""
BACKLOG_WAIT_S: Final = 60.0
"""The longest the next close of a backlog waits for the previous one's vectors."""

ALL: Final = "*"
"""A request to close every agent's pending sessions (choird's start)."""


class CloseSettings(Protocol):
    """What a close reads of the running config (`ChoirConfig`), anew at each close."""

    @property
    def agents(self) -> Collection[str]: ...

    @property
    def memory_chunk_chars(self) -> int: ...

    @property
    def mid_term_sessions(self) -> int: ...


class SessionCloser:
    """Closes ended sessions into memory, in one background task."""

    def __init__(
        self,
        pool: Pool,
        store: MemoryStore,
        index: MemoryIndex,
        config: Callable[[], CloseSettings],
        *,
        clock: Clock = utc_now,
        retry_s: tuple[float, ...] = RETRY_S,
    ) -> None:
        self._pool = pool
        self._store = store
        self._index = index
        self._config = config
        self._clock = clock
        self._retry_s = retry_s
        self._wanted: set[str] = set()
        """Agents (or ALL) whose pending sessions are to be closed."""
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._worker: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._attempt = 0
        self.lock = asyncio.Lock()
        """Held by each close (its promotions included) and by each session a tool-row backfill
        fills (`tool_rows.ToolRowBackfill`): a promotion never races a backfill."""
        self._failed: set[str] = set()
        """Sessions whose close failed (not for want of Postgres): retried at the next start."""
        self.closed = 0
        """Sessions closed by this run (the operator's progress)."""

    # -- requests ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker and close every ended session not closed yet."""
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="memory-close")
        self.request(ALL)

    def session_ended(self, ended: SessionEnded) -> None:
        """A `SessionService` listener: close the agent's newly ended sessions (this one, and
        an older crashed one a newer session has aged out)."""
        self.request(ended.agent_id)

    def request(self, agent_id: str) -> None:
        self._wanted.add(agent_id)
        self._idle.clear()
        self._wake.set()

    async def idle(self) -> None:
        """Wait until every requested close is done (or failed)."""
        await self._idle.wait()

    # -- the worker --------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            wanted, self._wanted = self._wanted, set()
            for agent_id in [None] if ALL in wanted else sorted(wanted):
                try:
                    await self.close_pending(agent_id)
                except Exception as exc:
                    if not _unavailable(exc):
                        _log.exception("memory close failed", fields={"agent_id": agent_id})
                        continue
                    self._later(agent_id or ALL, exc)
            if not self._wanted:
                self._idle.set()

    def _later(self, agent_id: str, exc: BaseException) -> None:
        """Postgres is away: ask again after a while (it restarts, or comes back)."""
        wait = self._retry_s[min(self._attempt, len(self._retry_s) - 1)]
        self._attempt += 1
        _log.warning(
            "memory close waits for Postgres; it is retried",
            fields={"agent_id": agent_id, "retry_in_s": wait, "error": _describe(exc)},
        )
        if self._retry is not None:
            self._retry.cancel()
        self._retry = asyncio.get_running_loop().call_later(wait, self.request, agent_id)

    async def close_pending(self, agent_id: str | None = None) -> int:
        """Close the pending sessions of `agent_id` (of every configured agent when None);
        how many were closed. A backlog (choird's start on an old home) is worked off one
        session at a time, each waiting for the vectors of the ones before (bounded), with
        its progress logged every `PROGRESS_EVERY` sessions."""
        agents = list(self._config().agents)
        closed = 0
        backlog = False
        done: set[str] = set()  # each session once per call, whatever its close left behind
        while True:
            async with self._pool.acquire() as conn:
                pending = await pending_closes(
                    conn, agents, agent_id=agent_id, skip=self._failed | done, limit=PAGE
                )
            if not pending:
                if backlog:
                    _log.info(f"memory: {closed} ended sessions closed")
                return closed
            if not backlog and len(pending) > 1:
                backlog = True
                more = "+" if len(pending) == PAGE else ""
                _log.info(f"memory: closing {len(pending)}{more} ended sessions in the background")
            for session in pending:
                done.add(session.session_id)
                if closed:
                    await self._index_caught_up()
                if await self._close_logged(session):
                    closed += 1
                    if backlog and closed % PROGRESS_EVERY == 0:
                        _log.info(f"memory: {closed} ended sessions closed so far")

    async def _index_caught_up(self) -> None:
        """Let the vectors queued so far be stored before queueing more (bounded): a backlog
        must not pile every old session's chunks into the embedding queue at once."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(BACKLOG_WAIT_S):
                await self._index.settled()

    async def _close_logged(self, pending: PendingClose) -> bool:
        try:
            async with self.lock:
                await self.close_one(pending)
        except Exception as exc:
            if _unavailable(exc):
                raise
            self._failed.add(pending.session_id)
            _log.error(
                "memory close failed; it is retried at choird's next start",
                fields={
                    "agent_id": pending.agent_id,
                    "session_id": pending.session_id,
                    "error": _describe(exc),
                },
            )
            return False
        self._attempt = 0
        return True

    async def close_one(self, pending: PendingClose) -> int:
        """Close one session (idempotent); how many event chunks this run stored or found."""
        agent_id, session_id = pending.agent_id, pending.session_id
        config = self._config()
        async with self._pool.acquire() as conn:
            begun = await begin_close(
                conn, session_id, agent_id, config.memory_chunk_chars, pending.ack_rev
            )
            if begun is None:
                return 0
            if pending.interrupted:
                _log.warning(
                    "memory: resuming the interrupted close of a session",
                    fields={"agent_id": agent_id, "session_id": session_id},
                )
            session = await read_session(conn, session_id, after_rev=begun.from_rev)
        # CPU-bound for long sessions (~0.3 s per 5k events): off the event loop
        chunks = await asyncio.to_thread(_numbered, session, begun.chunk_chars, begun.first_index)
        tool_rows = await asyncio.to_thread(session_tool_rows, session)
        refs: list[ChunkRef] = []
        for start in range(0, len(chunks), STORE_PAGE):  # embedding starts with the first page
            page = chunks[start : start + STORE_PAGE]
            stored = await self._store.add_session_chunks(
                agent_id, session_id, Tier.MID_TERM, page, owner=session.user
            )
            for ref in stored:
                if ref.tier is Tier.MID_TERM:  # a promoted session's detail gets no vector
                    self._index.index(agent_id, "memory", ref.id, ref.text)
            refs += stored
        # each tool call in one sentence, keyed apart from the chunks (`memory_tool_rows`)
        described = await self._store.add_tool_rows(agent_id, session_id, tool_rows)
        index_rows(self._index, agent_id, described)
        # the compactions' archives not stored when their events became durable, and the
        # session's summary: the summary tree's branch over them
        await store_session_tree(self._store, self._index.index, agent_id, session, tool_rows)
        await failpoint("memory.close.after_chunks")
        promoted = await self._promote(agent_id, config.mid_term_sessions, begun.chunk_chars)
        async with self._pool.acquire() as conn:
            await finish_close(conn, session_id, len(refs), pending.ack_rev, self._clock())
        self.closed += 1
        _log.info(
            "session memory closed",
            fields={
                "agent_id": agent_id,
                "session_id": session_id,
                "events": len(session.events),
                "after_rev": begun.from_rev,
                "chunks": len(refs),
                "new_chunks": sum(ref.new for ref in refs),
                "tool_rows": len(described),
                "promoted": promoted,
            },
        )
        return len(refs)

    async def _promote(self, agent_id: str, keep: int, chunk_chars: int) -> list[str]:
        """Promote the agent's oldest mid-term sessions beyond `keep` (§11.5)."""
        sessions = await self._store.mid_term_sessions(agent_id)
        promoted = []
        for session_id in sessions[: max(len(sessions) - keep, 0)]:
            async with self._pool.acquire() as conn:
                summary = await read_summary(conn, session_id)
            chunks = summary_chunks_of(
                StoredSession(session_id, [], summary), max_chars=chunk_chars
            )
            refs = await self._store.promote_session(agent_id, session_id, chunks)
            for ref in refs:
                self._index.index(agent_id, "memory", ref.id, ref.text)
            promoted.append(session_id)
            _log.info(
                "session promoted to long-term memory",
                fields={
                    "agent_id": agent_id,
                    "session_id": session_id,
                    "summary_chunks": len(refs),
                },
            )
        return promoted

    # -- shutdown ----------------------------------------------------------------------------

    async def aclose(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Let a close in progress finish for at most `grace_s`, then cancel: what is left is
        resumed at the next start."""
        if self._retry is not None:
            self._retry.cancel()
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_s):
                await self._idle.wait()
        if not self._idle.is_set():
            _log.info("memory close interrupted by choird's stop; it resumes at the next start")
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker


def _numbered(session: StoredSession, max_chars: int, first_index: int) -> list[MemoryChunk]:
    """The session's chunks, numbered on from `first_index` (the chunks of a first close)."""
    chunks = event_chunks(session, max_chars=max_chars)
    if not first_index:
        return chunks
    return [replace(chunk, index=chunk.index + first_index) for chunk in chunks]


def _unavailable(exc: BaseException) -> bool:
    return isinstance(exc, UnavailableError) or classify(exc) is not None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
