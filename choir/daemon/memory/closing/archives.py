"""Compaction archives stored by choird (seed design 002), from the events that name them.

    writer = ArchiveWriter(parts)                   # parts(): (MemoryStore, Indexer), once ready
    replicator.subscribe(lambda d: writer.durable(d.agent_id, d.session_id, d.events))
    ...                                             # and at each session's close:
    await store_session_archives(store, index, agent_id, session)

A compaction's `MemoryWriteCommitted` carries the archive's name; its text is the folded
window's summary the agent's model wrote (choird infers nothing, §11.5). The event is the
source of truth: choird stores the archive as a knowledge item as soon as the event is durable,
so it is searchable during the session — and again, idempotently by name, when the session is
closed into memory (`close.SessionCloser`). A crash between the event's durability and the
eager write (choird killed, Postgres away, the failpoint `memory.archive.before_store`) loses
nothing then: the close, which is itself resumed after a crash, stores what is missing, and an
archive stored twice is stored once. The archive's vector is queued like any knowledge item's;
one not written is backfilled.

At the close the session's tool calls (their computed sentences, `tool_rows`) become one more
leaf, `tools/<session>/<last rev>`, and the session's summary — the agent's, made at graceful
stop — becomes the summary tree's branch over those archives and that leaf
(`choir.core.memory.summaries.tree`): an item `summary/<session>` linked `derived_from` each of
them, stored once however often the close runs.

A roll-up (`MemoryRollup`, the tree's root: the agent's model over session summaries, written
while edge was idle) is stored the same way — eagerly when its event is durable (failpoint
`memory.rollup.before_store`), again at the close — as `rollup/<ISO minute>` linked
`derived_from` each summary it covers (`choir.store.knowledge.rollups`).

Every one of these items belongs to the user of the session it comes from (its bound DM, read
from the session's bindings; "": none): knowledge class with that `owner_user`, seen by the
agent's sessions of that user only and by the operator (`choir.core.memory.access.Viewer`). A
roll-up is the one user's whose summaries it covers (the roll-up tool lists one user's).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.chunks import MemoryChunk
from choir.core.memory.summaries.archives import ArchiveEntry, archive_entry
from choir.core.memory.summaries.rollup import rollup_entry
from choir.core.memory.summaries.tree import (
    ROLLUP_KEY,
    session_summary_entry,
    tool_sequence_entry,
    who_said_what,
)
from choir.errors import ConflictError, UsageError
from choir.failpoints import failpoint
from choir.logs import get_logger, redact
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import Event, MemoryRollup, MemoryWriteCommitted

if TYPE_CHECKING:
    from choir.daemon.memory.closing.chunks import StoredSession
    from choir.daemon.memory.store import MemoryStore
    from choir.daemon.memory.tools.host import Indexer

_log = get_logger("choir.memory.archives")

OWNERS_KEPT: Final = 256
"""Sessions whose user `ArchiveWriter` remembers (a session's bindings never change)."""
ARCHIVE_POINT: Final = "memory.archive.before_store"
ROLLUP_POINT: Final = "memory.rollup.before_store"
"""The failpoints before the eager store of an archive, of a roll-up."""

Parts = Callable[[], Awaitable[tuple["MemoryStore", "Indexer"]]]
"""choird's memory store and indexer, once memory has started (`ChoirDaemon._memory_parts`)."""


def archives_of(session_id: str, events: Iterable[tuple[int, Event]]) -> list[ArchiveEntry]:
    """The archive entries the compactions among `events` ((rev, event), any order) named,
    with any secret the model repeated redacted (as session chunks are)."""
    entries = []
    for rev, event in events:
        if isinstance(event, MemoryWriteCommitted):
            entry = archive_entry(session_id, rev, event)
            if entry is not None:
                entries.append(replace(entry, text=redact(entry.text)))
    return entries


def rollups_of(session_id: str, events: Iterable[tuple[int, Event]]) -> list[ArchiveEntry]:
    """The roll-up entries among `events` ((rev, event)), redacted like archives."""
    return [
        replace(entry, text=redact(entry.text))
        for entry in (
            rollup_entry(session_id, rev, event)
            for rev, event in events
            if isinstance(event, MemoryRollup)
        )
    ]


async def store_entries(
    store: MemoryStore,
    index: Indexer,
    agent_id: str,
    entries: Sequence[ArchiveEntry],
    *,
    owner: str,
) -> int:
    """Store the summary tree items among `entries` not stored yet as `owner`'s (the user of
    the session they come from; "": none) — archives and tool sequences as they are, roll-ups
    linked to the summaries they cover — and queue their vectors; how many were new."""
    if not entries:
        return 0
    owned = [replace(entry, owner=owner) for entry in entries]
    roots = [entry for entry in owned if ROLLUP_KEY in entry.metadata]
    leaves = [entry for entry in owned if ROLLUP_KEY not in entry.metadata]
    stored = [
        *(await store.store_archives(agent_id, leaves) if leaves else []),
        *(await store.store_rollups(agent_id, roots) if roots else []),
    ]
    for item in stored:
        index(agent_id, "knowledge", item.id, item.text)
    if stored:
        names = [item.name for item in stored]
        _log.info("memory tree items stored", fields={"agent_id": agent_id, "names": names})
    return len(stored)


async def store_session_branch(
    store: MemoryStore, index: Indexer, agent_id: str, session: StoredSession
) -> bool:
    """At a session's close: store its summary (the tree's branch) linked derived_from its
    archives, unless stored already; whether it was stored now (False without a summary)."""
    summary = session.summary
    if summary is None:
        return False
    times = [stored.ts for stored in session.events if stored.ts is not None]
    participation = who_said_what(stored.event for stored in session.events)

    def make(archives: list[str]) -> ArchiveEntry:
        entry = session_summary_entry(
            session.session_id,
            summary,
            first_at=min(times, default=None),
            last_at=max(times, default=None),
            participation=participation,
            archives=archives,
        )
        return replace(entry, text=redact(entry.text), owner=session.user)

    item = await store.store_session_summary(agent_id, session.session_id, make)
    if item is not None:
        index(agent_id, "knowledge", item.id, item.text)
        _log.info("session summary stored", fields={"agent_id": agent_id, "name": item.name})
    return item is not None


async def store_session_tree(
    store: MemoryStore,
    index: Indexer,
    agent_id: str,
    session: StoredSession,
    tool_rows: Sequence[MemoryChunk] = (),
) -> None:
    """At a session's close: its archives and its tool sequence (`tool_rows`, the leaves), then
    its summary over them, then its roll-ups. A refusal (an item of another kind holding a tree
    item's name) is logged and the close goes on: the session's memory must not wait on it.
    Postgres being away is raised (the close is retried)."""

    async def tools(store: MemoryStore, index: Indexer, agent_id: str, s: StoredSession) -> int:
        return await store_tool_sequence(store, index, agent_id, s, tool_rows)

    for step in (store_session_archives, tools, store_session_branch, store_session_rollups):
        try:
            await step(store, index, agent_id, session)
        except (ConflictError, UsageError) as refused:
            _log.error(
                "summary tree items of a session not stored",
                fields={
                    "agent_id": agent_id,
                    "session_id": session.session_id,
                    "error": refused.message,
                },
            )


async def store_tool_sequence(
    store: MemoryStore,
    index: Indexer,
    agent_id: str,
    session: StoredSession,
    tool_rows: Sequence[MemoryChunk],
) -> int:
    """The leaf of the session's tool calls (`tool_rows`, redacted already), unless stored; 1
    when stored now."""
    entry = tool_sequence_entry(session.session_id, tool_rows)
    if entry is None:
        return 0
    return await store_entries(store, index, agent_id, [entry], owner=session.user)


async def store_session_archives(
    store: MemoryStore, index: Indexer, agent_id: str, session: StoredSession
) -> int:
    """At a session's close: store every archive its events name that is not stored yet."""
    events = ((stored.rev, stored.event) for stored in session.events)
    entries = archives_of(session.session_id, events)
    return await store_entries(store, index, agent_id, entries, owner=session.user)


async def store_session_rollups(
    store: MemoryStore, index: Indexer, agent_id: str, session: StoredSession
) -> int:
    """At a session's close: store every roll-up its events hold that is not stored yet."""
    events = ((stored.rev, stored.event) for stored in session.events)
    entries = rollups_of(session.session_id, events)
    return await store_entries(store, index, agent_id, entries, owner=session.user)


class ArchiveWriter:
    """Stores the archives of newly durable compactions, and the roll-ups of newly durable
    `MemoryRollup` events, in the background, one task each."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts
        self._tasks: set[asyncio.Task[None]] = set()
        self._owners: dict[str, str] = {}
        """The user of each session archives were stored for, newest last: read once per
        session, not once per compaction."""

    def durable(self, agent_id: str, session_id: str, events: Sequence[CommittedEvent]) -> None:
        """A replication listener: store the archives `events` name (a batch without any costs
        one pass over its kinds)."""
        entries = archives_of(session_id, ((e.rev, e.event) for e in events))
        if entries:
            work = self._store(agent_id, session_id, entries, ARCHIVE_POINT)
            self._spawn(work, "memory-archive")
        roots = rollups_of(session_id, ((e.rev, e.event) for e in events))
        if roots:
            self._spawn(self._store(agent_id, session_id, roots, ROLLUP_POINT), "memory-rollup")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settled(self) -> None:
        """Wait for the writes in flight (memory's start, before its next piece; tests)."""
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the writes in flight: the sessions' closes store what they did not."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _store(
        self, agent_id: str, session_id: str, entries: list[ArchiveEntry], point: str
    ) -> None:
        what = "memory roll-up" if point == ROLLUP_POINT else "compaction archive"
        try:
            await failpoint(point)
            store, index = await self._parts()
            owner = await self._owner(store, session_id)
            await store_entries(store, index, agent_id, entries, owner=owner)
        except Exception as exc:
            _log.warning(
                f"{what} not stored yet; the session's close stores it",
                fields={
                    "agent_id": agent_id,
                    "session_id": session_id,
                    "names": [entry.name for entry in entries],
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )

    async def _owner(self, store: MemoryStore, session_id: str) -> str:
        owner = self._owners.get(session_id)
        if owner is None:
            owner = self._owners[session_id] = await store.session_user(session_id)
            if len(self._owners) > OWNERS_KEPT:
                del self._owners[next(iter(self._owners))]
        return owner


__all__ = [
    "ArchiveWriter",
    "archives_of",
    "rollups_of",
    "store_entries",
    "store_session_archives",
    "store_session_branch",
    "store_session_rollups",
    "store_session_tree",
    "store_tool_sequence",
]
