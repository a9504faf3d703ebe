"""A memory query (§11.7): what is asked, checked before any SQL, and sent to the right search.

    hits = await run_search(conn, agent_id, MemoryQuery(store="knowledge", mode="hybrid",
                                                       text="theme", vector=embedded))

Stores: `session` (mid-term chunks and long-term summaries) and `knowledge`. Modes: `semantic`
(a query vector), `text` (query text), `hybrid` (both, fused by reciprocal rank), for the
session store `session_detail` (one promoted session's detail chunks, `session_id` required)
and for knowledge `relevance` (query text, its vector when there is one: design 004's formula,
`choir.daemon.memory.search.relevance`).
The caller embeds the query text; the store holds no embedder. Every way a query can be wrong
is a `MemoryQueryError` naming the problem, raised before the database is touched.

A session row belongs to its session's user: a query with a `viewer` other than the operator
keeps only the rows that reader sees (`Viewer.sees`), reading the ranking deeper
(`OWNED_DEPTHS`) when too few of the top rows are its own. (Knowledge items are filtered by the
query's `GraphFilter` scope: `graph_search`.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

import asyncpg

from choir.core.memory.access import EVERYONE, Viewer
from choir.core.memory.knowledge.relevance import RelevanceWeights
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.search.bm25_index import KnowledgeBm25
from choir.daemon.memory.search.relevance import CANDIDATES as RELEVANCE_CANDIDATES
from choir.daemon.memory.search.relevance import relevance_search
from choir.errors import UsageError
from choir.store.memory import search as memory_search
from choir.store.memory.search import MemoryHit, StoreName
from choir.store.postgres.pool import Connection

MAX_LIMIT: Final = 100
EF_SEARCH: Final = 96
"""HNSW candidate list per vector query; its cost grows with it. Recall@10 against exact search
at 100k chunks of `bench.memory`'s corpus, on the indexes of agent migration 5 (m 8,
ef_construction 128): 0.940 at 48, 0.955 at 64, 0.961 at 80, 0.963 at 96, 0.966 at 112 (~720,
~910, ~1,100, ~1,250, ~1,410 index pages read per query). At 80 other builds of the same index
gave 0.955 and 0.960 (levels are drawn at random): 96 keeps a margin over the 0.95 goal. The m 16
indexes of migration 3 read ~1,170 pages for 0.961 (at 48), and cost each insert twice as much."""
STORES: Final[tuple[StoreName, ...]] = ("session", "knowledge")
OWNED_DEPTHS: Final = (200, 1000)
"""How deep a session search of one reader reads the ranking, in turn, until `limit` of its
rows are found (another user's rows ranked above them are read and left out)."""


class SearchMode(StrEnum):
    SEMANTIC = "semantic"
    TEXT = "text"
    HYBRID = "hybrid"
    SESSION_DETAIL = "session_detail"
    RELEVANCE = "relevance"


_NEEDS_VECTOR: Final = frozenset({SearchMode.SEMANTIC, SearchMode.HYBRID})
_NEEDS_TEXT: Final = frozenset({SearchMode.TEXT, SearchMode.HYBRID, SearchMode.RELEVANCE})
_MODES: Final = {
    "session": tuple(m for m in SearchMode if m is not SearchMode.RELEVANCE),
    "knowledge": (SearchMode.SEMANTIC, SearchMode.TEXT, SearchMode.HYBRID, SearchMode.RELEVANCE),
}


class MemoryQueryError(UsageError):
    """A memory query that cannot run as asked; the message names the problem and the fix."""


@dataclass(frozen=True, slots=True)
class MemoryQuery:
    """One search of one agent's memory, as a tool or a command asks it."""

    store: str = "session"
    mode: str = "semantic"
    text: str = ""
    """The query text (text, hybrid; optional for session_detail)."""
    vector: Vector | None = None
    """The embedded query text (semantic, hybrid)."""
    session_id: str | None = None
    """The promoted session to open (session_detail only)."""
    limit: int = 10
    viewer: Viewer = EVERYONE
    """Whose session rows the answer may hold (the operator: everyone's)."""


def checked(query: MemoryQuery) -> tuple[StoreName, SearchMode]:
    """The query's store and mode, or the `MemoryQueryError` saying what is wrong with it."""
    store = next((name for name in STORES if name == query.store), None)
    if store is None:
        raise MemoryQueryError(f"unknown memory store {query.store!r}: use session or knowledge")
    modes = _MODES[store]
    mode = next((m for m in modes if m.value == query.mode), None)
    if mode is None:
        raise MemoryQueryError(
            f"unknown search mode {query.mode!r} for store {store}: use "
            + ", ".join(m.value for m in modes)
        )
    _check_inputs(query, mode)
    return store, mode


def _check_inputs(query: MemoryQuery, mode: SearchMode) -> None:
    if not 1 <= query.limit <= MAX_LIMIT:
        raise MemoryQueryError(f"limit must be 1 to {MAX_LIMIT}, not {query.limit}")
    if mode is SearchMode.SESSION_DETAIL and not query.session_id:
        raise MemoryQueryError("mode session_detail needs a session_id: the session to open")
    if mode is not SearchMode.SESSION_DETAIL and query.session_id is not None:
        raise MemoryQueryError(f"session_id is for mode session_detail, not {mode.value}")
    if mode in _NEEDS_VECTOR and query.vector is None:
        raise MemoryQueryError(
            f"mode {mode.value} needs the query's vector; use mode text when no embedder answers"
        )
    if mode in _NEEDS_TEXT and not query.text.strip():
        raise MemoryQueryError(f"mode {mode.value} needs query text")


async def run_search(
    conn: Connection,
    agent_id: str,
    query: MemoryQuery,
    bm25: KnowledgeBm25,
    weights: RelevanceWeights | None = None,
) -> list[MemoryHit]:
    """Run a checked query on `conn` (already running as the agent, `ef_search` set); knowledge
    text and relevance search rank with `bm25`, the process' in-memory indexes, relevance with
    `weights` (config.json's `relevance`; None: the defaults)."""
    store, mode = checked(query)
    try:
        if mode is SearchMode.RELEVANCE:
            return await relevance_search(
                conn,
                agent_id,
                query.text,
                query.vector,
                query.limit,
                bm25=bm25,
                weights=weights or RelevanceWeights(),
            )
        if store == "session" and not query.viewer.everyone:
            return await _owned(conn, agent_id, mode, query, bm25)
        return await _dispatch(conn, agent_id, store, mode, query, bm25)
    except asyncpg.DataError as exc:  # pgvector: "different vector dimensions 3 and 256"
        raise MemoryQueryError(
            f"the query vector does not fit agent {agent_id}'s embeddings ({exc}); embed the "
            "query with the configured model"
        ) from None


async def _dispatch(
    conn: Connection,
    agent_id: str,
    store: StoreName,
    mode: SearchMode,
    query: MemoryQuery,
    bm25: KnowledgeBm25,
) -> list[MemoryHit]:
    if mode is SearchMode.SESSION_DETAIL:
        assert query.session_id is not None
        return await memory_search.session_detail(
            conn, agent_id, query.session_id, query.text, query.limit
        )
    if mode is SearchMode.TEXT and store == "knowledge":
        ranked = await bm25.top(conn, agent_id, query.text, query.limit)
        return await memory_search.knowledge_hits(conn, agent_id, ranked)
    if mode is SearchMode.TEXT:
        return await memory_search.text(conn, agent_id, query.text, query.limit)
    assert query.vector is not None
    if mode is SearchMode.SEMANTIC:
        return await memory_search.semantic(conn, agent_id, store, query.vector, query.limit)
    return await memory_search.hybrid(conn, agent_id, store, query.text, query.vector, query.limit)


async def _owned(
    conn: Connection, agent_id: str, mode: SearchMode, query: MemoryQuery, bm25: KnowledgeBm25
) -> list[MemoryHit]:
    """The session rows of `query` its viewer sees, best first: the ranking read deeper until
    `limit` pass or it has nothing deeper."""
    kept: list[MemoryHit] = []
    for depth in (query.limit, *OWNED_DEPTHS):
        depth = max(depth, query.limit)
        if mode in _NEEDS_VECTOR:  # the HNSW index returns at most ef_search rows
            await conn.execute(f"SET LOCAL hnsw.ef_search = {max(depth, EF_SEARCH):d}")
        deeper = replace(query, limit=depth)
        hits = await _dispatch(conn, agent_id, "session", mode, deeper, bm25)
        kept = [hit for hit in hits if query.viewer.sees(hit.source.owner_user)]
        if len(kept) >= query.limit or (mode not in _NEEDS_VECTOR and len(hits) < depth):
            break
    return kept[: query.limit]


def ef_search(query: MemoryQuery) -> int:
    """The HNSW breadth for `query`: the index returns at most ef_search rows, so a deeper
    list (a large limit, hybrid's candidates) needs a wider search."""
    depths = {"hybrid": memory_search.HYBRID_CANDIDATES, "relevance": RELEVANCE_CANDIDATES}
    depth = max(query.limit, depths[query.mode]) if query.mode in depths else 0
    return max(EF_SEARCH, query.limit, depth)
