"""choird's `MemoryStore` (§11.9): an agent's session memory and knowledge, behind one interface.

    store = PostgresMemoryStore(pool)
    item = await store.put_knowledge("ada", "prefers dark mode", name="user.theme")
    refs = await store.add_session_chunks("ada", session_id, Tier.MID_TERM, chunks)
    await store.set_vectors("ada", "memory", [(ref.id, vector), ...])
    hits = await store.search("ada", MemoryQuery(store="session", mode="text", text="deploy"))

Every call runs in one transaction under the agent's own role with its schema on the search
path (`run_as_agent`, §23.0): choird's admin role never touches an agent's memory, so a query
built wrong cannot reach another agent's schema or the control plane. The SQL lives in
`choir.store` (`memory`, `memory_vectors`, `memory_search`, `memory_stats`, `knowledge`). A lost
connection or a server going away is an `UnavailableError` (retry later); whatever a call wrote
before it is rolled back with its transaction. Given `models` (choird's `VectorModels`), an
agent whose stored vectors are another embedding model's is searched by text and gets no new
vector until `memory reembed` switches it: two models' vectors are never compared.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol, TypeVar
from uuid import UUID

from choir.core.memory.chunks import MemoryChunk, Tier
from choir.core.memory.knowledge.graph import (
    NO_FIELDS,
    NO_FILTER,
    EdgeType,
    GraphFilter,
    ItemFields,
)
from choir.core.memory.knowledge.names import check_name
from choir.core.memory.knowledge.provenance import Provenance
from choir.core.memory.knowledge.relevance import RelevanceWeights, check_kind
from choir.core.memory.recall import MAX_ITEMS, admitted
from choir.core.memory.summaries.archives import ARCHIVE_LOC, ArchiveEntry, session_segment
from choir.core.memory.summaries.rollup import PendingSummary
from choir.core.memory.summaries.tree import TOOLS_LOC
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.embedding.vector_models import VectorModels
from choir.daemon.memory.search.bm25_index import KnowledgeBm25
from choir.daemon.memory.search.graph import KnowledgeHit, filtered_search
from choir.daemon.memory.search.query import MemoryQuery, checked, ef_search, run_search
from choir.daemon.memory.search.relevance import relevance_search
from choir.errors import NotFoundError, UnavailableError
from choir.store.agent_schema import run_as_agent
from choir.store.knowledge import archives as knowledge_archives
from choir.store.knowledge import forget as knowledge_forget
from choir.store.knowledge import graph as knowledge_graph
from choir.store.knowledge import items as knowledge
from choir.store.knowledge import relevance as knowledge_relevance
from choir.store.knowledge import rollups as knowledge_rollups
from choir.store.knowledge import versions as knowledge_versions
from choir.store.knowledge import writes as knowledge_writes
from choir.store.knowledge.forget import Forgotten
from choir.store.knowledge.graph import NEIGHBOURS_MAX, Neighbour
from choir.store.knowledge.items import KnowledgeItem
from choir.store.knowledge.versions import KnowledgeVersion, Restored
from choir.store.knowledge.writes import Written
from choir.store.memory import chunks as memory
from choir.store.memory import stats as memory_stats
from choir.store.memory import tool_rows as memory_tool_rows
from choir.store.memory import vectors as memory_vectors
from choir.store.memory.chunks import ChunkRef, StoredChunk
from choir.store.memory.search import MemoryHit
from choir.store.memory.stats import MemoryStats
from choir.store.memory.vectors import MissingVector, VectorOf, VectorTarget
from choir.store.postgres.failures import classify
from choir.store.postgres.pool import Connection, Pool
from choir.store.sessions import session_user

T = TypeVar("T")
Choose = Callable[[list[MemoryHit]], list[MemoryHit]]
"""Which of a recall's ranked hits go into the prompt (access, budget: `daemon.memory.recall`)."""


class MemoryStore(Protocol):
    """An agent's memory: knowledge (tier 4), session chunks (tiers 2-3), vectors, search."""

    async def put_knowledge(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> KnowledgeItem:
        """The spec's insert and update-by-key: write the item that `name` names (a changed
        text loses its vector until embedded again), or add it (a derived name when None).
        Oversized content or a bad name is refused, nothing written. `kind` (correction,
        preference, fact, task) sets its importance for relevance, in the same transaction;
        None keeps it (a new item: fact). `provenance` is who wrote it (every write records
        one; None: unknown), kept with the item and the version."""
        ...

    async def add_knowledge(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> KnowledgeItem:
        """Add an item; a name some item answers to is `KnowledgeNameTaken`."""
        ...

    async def write_knowledge(
        self,
        agent_id: str,
        ref: UUID | str,
        text: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> Written:
        """Replace the content of the item `ref` names (None text, metadata or field: kept),
        keeping the previous version."""
        ...

    async def rename_knowledge(self, agent_id: str, ref: UUID | str, name: str) -> KnowledgeItem:
        """Rename the item `ref` names; a taken name is `KnowledgeNameTaken`."""
        ...

    async def alias_knowledge(self, agent_id: str, ref: UUID | str, alias: str) -> KnowledgeItem:
        """Let the item `ref` names answer to `alias` too."""
        ...

    async def knowledge_history(
        self, agent_id: str, ref: UUID | str, *, limit: int
    ) -> tuple[KnowledgeItem, list[KnowledgeVersion]]:
        """The item `ref` names and its versions, newest first."""
        ...

    async def restore_knowledge(
        self,
        agent_id: str,
        ref: UUID | str,
        version: int,
        provenance: Provenance | None = None,
        stored_as: Restored | None = None,
    ) -> Written:
        """Write an earlier version's content as the newest version (its text and data as
        `stored_as` makes them: sealed, in an encrypted memory)."""
        ...

    async def get_knowledge(self, agent_id: str, ref: UUID | str) -> KnowledgeItem:
        """The item whose id, name or alias is `ref`; `NotFoundError` when there is none."""
        ...

    async def list_knowledge(
        self,
        agent_id: str,
        *,
        limit: int,
        after: UUID | str | None = None,
        graph: GraphFilter = NO_FILTER,
    ) -> list[KnowledgeItem]:
        """A page of items passing `graph`, oldest first, after the item with id `after`."""
        ...

    async def link_knowledge(
        self, agent_id: str, source: UUID | str, target: UUID | str, edge_type: EdgeType
    ) -> tuple[KnowledgeItem, KnowledgeItem, bool]:
        """Link two items (both must exist); the two and whether the edge is new."""
        ...

    async def unlink_knowledge(
        self, agent_id: str, source: UUID | str, target: UUID | str, edge_type: EdgeType | None
    ) -> int:
        """Remove the edges from `source` to `target` (of one type or all); none is an error."""
        ...

    async def knowledge_neighbours(
        self,
        agent_id: str,
        ref: UUID | str,
        *,
        types: Collection[EdgeType] = (),
        graph: GraphFilter = NO_FILTER,
        limit: int = NEIGHBOURS_MAX,
    ) -> tuple[KnowledgeItem, list[Neighbour]]:
        """The item `ref` names and its neighbours at depth 1."""
        ...

    async def search_placed(
        self, agent_id: str, query: MemoryQuery, graph: GraphFilter = NO_FILTER
    ) -> list[KnowledgeHit]:
        """`search`, knowledge hits filtered by `graph` and carrying their loc, type, tags."""
        ...

    async def delete_knowledge(self, agent_id: str, ref: UUID | str) -> bool:
        """Remove the item whose id, name or alias is `ref`; whether there was one."""
        ...

    async def store_archives(
        self, agent_id: str, entries: Sequence[ArchiveEntry]
    ) -> list[KnowledgeItem]:
        """Store the compaction archives not stored yet, in one transaction; the new ones."""
        ...

    async def store_session_summary(
        self, agent_id: str, session_id: str, make: Callable[[list[str]], ArchiveEntry]
    ) -> KnowledgeItem | None:
        """Store the session's summary item `make(archive names)` unless stored, and link it
        derived_from each of the session's archives and tool sequences (and the roll-ups
        covering it to it); the new item, or None."""

    async def store_rollups(
        self, agent_id: str, entries: Sequence[ArchiveEntry]
    ) -> list[KnowledgeItem]:
        """Store the roll-ups (the tree's roots) not stored yet, each linked derived_from the
        summaries it covers, in one transaction; the new ones."""
        ...

    async def pending_summaries(
        self, agent_id: str, limit: int, *, user: str, besides: Sequence[str] = ()
    ) -> list[PendingSummary]:
        """The session summaries of `user` no roll-up covers yet (nor `besides`), oldest first;
        none pending: those of sessions with no user (one roll-up is one user's)."""
        ...

    async def knowledge_about(self, agent_id: str, user: str, *, limit: int) -> list[KnowledgeItem]:
        """The items a session with `user` (a DM name) wrote a version of, or `user` owns
        (personal, or derived from its sessions), oldest first."""
        ...

    async def forget_knowledge(self, agent_id: str, ref: UUID | str, *, by: str) -> Forgotten:
        """Remove the item `ref` names with its names, versions, vector, edges and use counts,
        from Postgres and this choird's BM25 index, recording that `by` forgot it (one
        transaction); `NotFoundError` when no item answers to `ref`."""
        ...

    async def add_session_chunks(
        self,
        agent_id: str,
        session_id: str,
        tier: Tier,
        chunks: Sequence[MemoryChunk],
        *,
        owner: str = "",
    ) -> list[ChunkRef]:
        """Store a session's chunks, `owner` its user ("": the user of its rows stored
        already); idempotent (a rerun stores nothing, same ids back)."""
        ...

    async def session_user(self, session_id: str) -> str:
        """The user of `session_id` (its bound DM; "": none, or no such session): what choird
        derives from the session is that user's."""
        ...

    async def get_chunk(self, agent_id: str, chunk_id: UUID) -> StoredChunk | None:
        """The session chunk with id `chunk_id`, or None (an operator opening a search hit)."""
        ...

    async def set_vectors(
        self, agent_id: str, target: VectorTarget, vectors: Sequence[VectorOf]
    ) -> int:
        """Store embeddings, each `(id, vector)` or `(id, vector, text it was computed from)`;
        rows deleted, promoted or holding another text meanwhile are skipped. A vector of the
        wrong size refuses the whole batch."""
        ...

    async def missing_vectors(self, agent_id: str, *, limit: int) -> list[MissingVector]:
        """Searchable rows still without a vector (never long-term detail): the backfill."""
        ...

    async def mid_term_sessions(self, agent_id: str) -> list[str]:
        """Sessions with mid-term chunks, oldest first."""
        ...

    async def promote_session(
        self, agent_id: str, session_id: str, summary_chunks: Sequence[MemoryChunk]
    ) -> list[ChunkRef]:
        """Move a session to long-term memory in one transaction; idempotent."""
        ...

    async def add_tool_rows(
        self, agent_id: str, session_id: str, rows: Sequence[MemoryChunk]
    ) -> list[ChunkRef]:
        """Store the session's tool-call rows not stored yet (`tool_synthesis`); those stored."""
        ...

    async def described_sessions(self, agent_id: str) -> dict[str, int]:
        """The agent's sessions with tool-call rows stored, and how many each."""
        ...

    async def tool_row_count(self, agent_id: str) -> int:
        """The agent's tool-call rows, in every tier."""
        ...

    async def search(self, agent_id: str, query: MemoryQuery) -> list[MemoryHit]:
        """Search the agent's session memory or knowledge."""
        ...

    async def stats(self, agent_id: str) -> MemoryStats:
        """Counts per tier, knowledge items, vectors missing, index sizes."""
        ...

    async def recall(
        self,
        agent_id: str,
        text: str,
        vector: Vector | None,
        choose: Choose,
        graph: GraphFilter = NO_FILTER,
    ) -> list[MemoryHit]:
        """The knowledge items relevant to `text` that pass `graph` (the memories the session
        may read) and that `choose` keeps (a prompt's memories, design 004); only those count
        an access (reinforcement), in the search's transaction."""
        ...

    async def warm_bm25(self, agent_id: str) -> None:
        """Build (or catch up) `agent_id`'s BM25 index now, not at its first search."""
        ...


class PostgresMemoryStore:
    """`MemoryStore` over the per-agent schemas of choird's database (§23.2-23.3)."""

    def __init__(
        self,
        pool: Pool,
        *,
        models: VectorModels | None = None,
        weights: Callable[[], RelevanceWeights] = RelevanceWeights,
    ) -> None:
        self._pool = pool
        self._weights = weights
        """config.json's relevance weights, read at each relevance search (hot-reloaded)."""
        self._models = models
        """Agents whose vectors are of another model (`memory reembed` pending): their
        searches go by text and no vector is stored next to the old ones. None: all current."""
        self._bm25 = KnowledgeBm25()
        self._warming: dict[str, asyncio.Future[None]] = {}
        """BM25 warm-ups under way, per agent (`warm_bm25`)."""
        """Each searched agent's BM25 index of its knowledge, caught up at every search."""

    async def put_knowledge(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> KnowledgeItem:
        meta = metadata or {}
        knowledge.check_item(text, name, meta, fields)  # refused before a connection is taken
        _checked_kind(kind)

        async def work(c: Connection) -> KnowledgeItem:
            written = await knowledge_writes.put_item(
                c, text, name=name, metadata=meta, fields=fields, provenance=provenance
            )
            return await _kind_set(c, written.item, kind)

        return await self._run(agent_id, work)

    async def add_knowledge(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> KnowledgeItem:
        meta = metadata or {}
        knowledge.check_item(text, name, meta, fields)
        _checked_kind(kind)

        async def work(c: Connection) -> KnowledgeItem:
            item = await knowledge_writes.add_item(
                c, text, name=name, metadata=meta, fields=fields, provenance=provenance
            )
            return await _kind_set(c, item, kind)

        return await self._run(agent_id, work)

    async def write_knowledge(
        self,
        agent_id: str,
        ref: UUID | str,
        text: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        fields: ItemFields = NO_FIELDS,
        kind: str | None = None,
        provenance: Provenance | None = None,
    ) -> Written:
        knowledge.check_item(text, None, metadata or {}, fields)
        _checked_kind(kind)

        async def work(c: Connection) -> Written:
            written = await knowledge_writes.write_item(
                c, ref, text, metadata=metadata, fields=fields, provenance=provenance
            )
            return replace(written, item=await _kind_set(c, written.item, kind))

        return await self._run(agent_id, work)

    async def rename_knowledge(self, agent_id: str, ref: UUID | str, name: str) -> KnowledgeItem:
        check_name(name)
        return await self._run(agent_id, lambda c: knowledge_writes.rename_item(c, ref, name))

    async def alias_knowledge(self, agent_id: str, ref: UUID | str, alias: str) -> KnowledgeItem:
        check_name(alias, "alias")
        return await self._run(agent_id, lambda c: knowledge_writes.alias_item(c, ref, alias))

    async def knowledge_history(
        self, agent_id: str, ref: UUID | str, *, limit: int
    ) -> tuple[KnowledgeItem, list[KnowledgeVersion]]:
        async def work(conn: Connection) -> tuple[KnowledgeItem, list[KnowledgeVersion]]:
            item_id, versions = await knowledge_versions.history(conn, ref, limit=limit)
            return await knowledge.item_by_id(conn, item_id), versions

        return await self._run(agent_id, work)

    async def restore_knowledge(
        self,
        agent_id: str,
        ref: UUID | str,
        version: int,
        provenance: Provenance | None = None,
        stored_as: Restored | None = None,
    ) -> Written:
        return await self._run(
            agent_id, lambda c: knowledge_versions.restore(c, ref, version, provenance, stored_as)
        )

    async def get_knowledge(self, agent_id: str, ref: UUID | str) -> KnowledgeItem:
        item = await self._run(agent_id, lambda c: knowledge.get_item(c, ref))
        if item is None:
            raise NotFoundError(f"agent {agent_id} has no knowledge item {ref}")
        return item

    async def list_knowledge(
        self,
        agent_id: str,
        *,
        limit: int,
        after: UUID | str | None = None,
        graph: GraphFilter = NO_FILTER,
    ) -> list[KnowledgeItem]:
        if graph.given:
            return await self._run(
                agent_id,
                lambda c: knowledge_graph.list_filtered(c, graph, limit=limit, after=after),
            )
        return await self._run(
            agent_id, lambda c: knowledge.list_items(c, limit=limit, after=after)
        )

    async def link_knowledge(
        self, agent_id: str, source: UUID | str, target: UUID | str, edge_type: EdgeType
    ) -> tuple[KnowledgeItem, KnowledgeItem, bool]:
        return await self._run(
            agent_id, lambda c: knowledge_graph.link(c, source, target, edge_type)
        )

    async def unlink_knowledge(
        self, agent_id: str, source: UUID | str, target: UUID | str, edge_type: EdgeType | None
    ) -> int:
        return await self._run(
            agent_id, lambda c: knowledge_graph.unlink(c, source, target, edge_type)
        )

    async def knowledge_neighbours(
        self,
        agent_id: str,
        ref: UUID | str,
        *,
        types: Collection[EdgeType] = (),
        graph: GraphFilter = NO_FILTER,
        limit: int = NEIGHBOURS_MAX,
    ) -> tuple[KnowledgeItem, list[Neighbour]]:
        return await self._run(
            agent_id,
            lambda c: knowledge_graph.neighbours(c, ref, types=types, graph=graph, limit=limit),
        )

    async def search_placed(
        self, agent_id: str, query: MemoryQuery, graph: GraphFilter = NO_FILTER
    ) -> list[KnowledgeHit]:
        comparable = self._comparable(agent_id, query)
        if comparable is None:
            return []
        weights = self._weights()
        return await self._run(
            agent_id,
            lambda c: filtered_search(c, agent_id, comparable, graph, self._bm25, weights),
            ef_search=ef_search(comparable),
        )

    async def delete_knowledge(self, agent_id: str, ref: UUID | str) -> bool:
        return await self._run(agent_id, lambda c: knowledge_writes.remove_item(c, ref))

    async def store_archives(
        self, agent_id: str, entries: Sequence[ArchiveEntry]
    ) -> list[KnowledgeItem]:
        async def work(c: Connection) -> list[KnowledgeItem]:
            stored = [await knowledge_archives.store_archive(c, entry) for entry in entries]
            return [item for item in stored if item is not None]

        return await self._run(agent_id, work)

    async def store_session_summary(
        self, agent_id: str, session_id: str, make: Callable[[list[str]], ArchiveEntry]
    ) -> KnowledgeItem | None:
        segment = session_segment(session_id)
        loc = f"{ARCHIVE_LOC}:{segment}"

        async def work(c: Connection) -> KnowledgeItem | None:
            leaves = await knowledge_archives.archive_names(c, loc)
            entry = make(leaves)
            item = await knowledge_archives.store_archive(c, entry)
            await knowledge_archives.link_sources(c, entry.name, leaves)
            tools = await knowledge_archives.archive_names(c, f"{TOOLS_LOC}:{segment}")
            await knowledge_archives.link_sources(c, entry.name, tools)
            await knowledge_rollups.link_covering(c, entry.name)
            return item

        return await self._run(agent_id, work)

    async def store_rollups(
        self, agent_id: str, entries: Sequence[ArchiveEntry]
    ) -> list[KnowledgeItem]:
        async def work(c: Connection) -> list[KnowledgeItem]:
            stored = [await knowledge_rollups.store_rollup(c, entry) for entry in entries]
            return [item for item in stored if item is not None]

        return await self._run(agent_id, work)

    async def pending_summaries(
        self, agent_id: str, limit: int, *, user: str, besides: Sequence[str] = ()
    ) -> list[PendingSummary]:
        return await self._run(
            agent_id,
            lambda c: knowledge_rollups.pending_summaries(
                c, limit, user=user, besides=list(besides)
            ),
        )

    async def knowledge_about(self, agent_id: str, user: str, *, limit: int) -> list[KnowledgeItem]:
        return await self._run(
            agent_id, lambda c: knowledge_forget.learnt_from(c, user, limit=limit)
        )

    async def forget_knowledge(self, agent_id: str, ref: UUID | str, *, by: str) -> Forgotten:
        gone = await self._run(agent_id, lambda c: knowledge_forget.forget(c, ref, by=by))
        if gone is None:
            raise NotFoundError(
                f"agent {agent_id} has no knowledge item {str(ref)!r} (a name, alias or id: see "
                f"choirctl knowledge list {agent_id})"
            )
        await self._bm25.drop(agent_id, gone.id)
        return gone

    async def add_session_chunks(
        self,
        agent_id: str,
        session_id: str,
        tier: Tier,
        chunks: Sequence[MemoryChunk],
        *,
        owner: str = "",
    ) -> list[ChunkRef]:
        return await self._run(
            agent_id, lambda c: memory.add_chunks(c, session_id, tier, chunks, owner=owner)
        )

    async def session_user(self, session_id: str) -> str:
        try:
            async with self._pool.acquire() as conn:
                return await session_user(conn, session_id)
        except Exception as exc:
            if classify(exc) is None:
                raise
            raise UnavailableError(
                f"the user of session {session_id} is unavailable: Postgres {classify(exc)}; "
                "retry when the database is back"
            ) from exc

    async def get_chunk(self, agent_id: str, chunk_id: UUID) -> StoredChunk | None:
        return await self._run(agent_id, lambda c: memory.get_chunk(c, chunk_id))

    async def set_vectors(
        self, agent_id: str, target: VectorTarget, vectors: Sequence[VectorOf]
    ) -> int:
        if self._models is not None and not self._models.current(agent_id):
            return 0  # another model's vectors are stored: the re-embed gives these rows theirs
        return await self._run(agent_id, lambda c: memory_vectors.set_vectors(c, target, vectors))

    async def missing_vectors(self, agent_id: str, *, limit: int) -> list[MissingVector]:
        return await self._run(agent_id, lambda c: memory_vectors.missing_vectors(c, limit=limit))

    async def mid_term_sessions(self, agent_id: str) -> list[str]:
        return await self._run(agent_id, memory.mid_term_sessions)

    async def promote_session(
        self, agent_id: str, session_id: str, summary_chunks: Sequence[MemoryChunk]
    ) -> list[ChunkRef]:
        return await self._run(agent_id, lambda c: memory.promote(c, session_id, summary_chunks))

    async def add_tool_rows(
        self, agent_id: str, session_id: str, rows: Sequence[MemoryChunk]
    ) -> list[ChunkRef]:
        return await self._run(
            agent_id, lambda c: memory_tool_rows.add_tool_rows(c, session_id, rows)
        )

    async def described_sessions(self, agent_id: str) -> dict[str, int]:
        return await self._run(agent_id, memory_tool_rows.described_sessions)

    async def tool_row_count(self, agent_id: str) -> int:
        return await self._run(agent_id, memory_tool_rows.tool_row_count)

    async def search(self, agent_id: str, query: MemoryQuery) -> list[MemoryHit]:
        comparable = self._comparable(agent_id, query)
        if comparable is None:
            return []
        weights = self._weights()
        return await self._run(
            agent_id,
            lambda c: run_search(c, agent_id, comparable, self._bm25, weights),
            ef_search=ef_search(comparable),
        )

    def _comparable(self, agent_id: str, query: MemoryQuery) -> MemoryQuery | None:
        """`query` (checked: refused before a connection is taken) as it can run on the agent's
        stored vectors: without its vector when they are another model's — comparing them would
        rank noise —, None when nothing is left to search by."""
        checked(query)
        if query.vector is None or not self._models or self._models.current(agent_id):
            return query
        if not query.text.strip():
            return None
        mode = query.mode if query.mode == "relevance" else "text"
        return replace(query, mode=mode, vector=None)

    async def stats(self, agent_id: str) -> MemoryStats:
        return await self._run(agent_id, memory_stats.memory_stats)

    async def recall(
        self,
        agent_id: str,
        text: str,
        vector: Vector | None,
        choose: Choose,
        graph: GraphFilter = NO_FILTER,
    ) -> list[MemoryHit]:
        query = MemoryQuery(store="knowledge", mode="relevance", text=text, vector=vector)
        comparable = self._comparable(agent_id, replace(query, limit=MAX_ITEMS))
        if comparable is None:
            return []
        weights = self._weights()

        async def work(conn: Connection) -> list[MemoryHit]:
            hits = await relevance_search(
                conn,
                agent_id,
                comparable.text,
                comparable.vector,
                comparable.limit,
                bm25=self._bm25,
                weights=weights,
                reinforce=False,
                admit=admitted,
            )
            if graph.given:  # another user's personal item never reaches this one's prompt
                allowed = await knowledge_graph.passing(
                    conn, [hit.source.id for hit in hits], graph
                )
                hits = [hit for hit in hits if hit.source.id in allowed]
            chosen = choose(hits)
            await knowledge_relevance.reinforce(conn, [hit.source.id for hit in chosen])
            return chosen

        return await self._run(agent_id, work, ef_search=ef_search(comparable))

    async def warm_bm25(self, agent_id: str) -> None:
        """Build (or catch up) `agent_id`'s BM25 index now, not at its first search
        (`prewarm`). Callers while one is under way share it: the session start's pre-warm and
        the agent's recall warm-up come together, and each would hold a Postgres connection
        (a backend of ~20 MB) waiting on the index's lock."""
        running = self._warming.get(agent_id)
        if running is None:
            running = asyncio.ensure_future(self._build_bm25(agent_id))
            self._warming[agent_id] = running
            running.add_done_callback(lambda done: self._warmed(agent_id, done))
        await asyncio.shield(running)

    async def _build_bm25(self, agent_id: str) -> None:
        await self._run(agent_id, lambda c: self._bm25.current(c, agent_id, ""))

    def _warmed(self, agent_id: str, done: asyncio.Future[None]) -> None:
        self._warming.pop(agent_id, None)
        if not done.cancelled():
            done.exception()  # retrieved: every caller that still waits gets it raised

    @property
    def bm25(self) -> KnowledgeBm25:
        """The agents' in-memory BM25 indexes (what a pre-warm built)."""
        return self._bm25

    async def _run(
        self,
        agent_id: str,
        work: Callable[[Connection], Awaitable[T]],
        *,
        ef_search: int | None = None,
    ) -> T:
        async with self._as_agent(agent_id, ef_search) as conn:
            return await work(conn)

    @asynccontextmanager
    async def _as_agent(self, agent_id: str, ef: int | None) -> AsyncIterator[Connection]:
        try:
            async with (
                self._pool.acquire() as conn,
                run_as_agent(conn, agent_id, ef_search=ef) as agent,
            ):
                yield agent
        except Exception as exc:
            if classify(exc) is None:
                raise
            raise UnavailableError(
                f"agent {agent_id}'s memory is unavailable: Postgres {classify(exc)} "
                f"({type(exc).__name__}); retry when the database is back"
            ) from exc


def _checked_kind(kind: str | None) -> None:
    if kind is not None:
        check_kind(kind)  # refused before a connection is taken


async def _kind_set(conn: Connection, item: KnowledgeItem, kind: str | None) -> KnowledgeItem:
    """`item`, given `kind` in the write's transaction (None: as it is)."""
    if kind is not None:
        await knowledge_relevance.set_kind(conn, item.id, kind)
    return item
