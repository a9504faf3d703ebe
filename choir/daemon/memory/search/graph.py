"""Knowledge searches filtered by loc, type and tags, and hits that carry them (seed design 003).

    hits = await filtered_search(conn, agent_id, query, GraphFilter(loc="projects:choir"))

The ranking is the store's own (`choir.store.memory.search`: BM25, vectors, fusion): a filter
keeps the hits whose items pass it, in rank order. When fewer than `limit` pass, the search
goes deeper (`DEPTHS`) before giving up, so a selective filter still fills its answer from the
best `FILTERED_DEPTH_MAX` hits of the whole store; an item ranked below them is not found by a
filtered search (say so: `choirctl knowledge list --loc` lists a subtree whole). Every hit,
filtered or not, carries its item's loc, type and tags, read in the search's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from choir.core.memory.knowledge.graph import GraphFilter, ItemType
from choir.core.memory.knowledge.relevance import RelevanceWeights
from choir.daemon.memory.search.bm25_index import KnowledgeBm25
from choir.daemon.memory.search.query import (
    MemoryQuery,
    MemoryQueryError,
    SearchMode,
    checked,
    run_search,
)
from choir.daemon.memory.search.relevance import relevance_search
from choir.store.knowledge import graph as knowledge_graph
from choir.store.knowledge import relevance as knowledge_relevance
from choir.store.memory import search as memory_search
from choir.store.memory.search import MemoryHit
from choir.store.postgres.pool import Connection

DEPTHS: Final = (200, 1000)
"""How deep a filtered search reads the ranking, in turn, until `limit` hits pass."""
FILTERED_DEPTH_MAX: Final = DEPTHS[-1]

_GRAPH: Final = (
    "SELECT id, loc, type, coalesce(metadata -> 'tags', '[]') AS tags, memory_class "
    "FROM knowledge_documents WHERE id = ANY($1)"
)


@dataclass(frozen=True, slots=True)
class Placed:
    """A knowledge hit's place in the graph."""

    loc: str
    type: ItemType
    tags: tuple[str, ...]
    memory_class: str = "knowledge"
    """The memory that holds it (system, knowledge, app, personal)."""


@dataclass(frozen=True, slots=True)
class KnowledgeHit:
    hit: MemoryHit
    placed: Placed | None
    """None for a session hit."""


async def filtered_search(
    conn: Connection,
    agent_id: str,
    query: MemoryQuery,
    graph: GraphFilter,
    bm25: KnowledgeBm25,
    weights: RelevanceWeights | None = None,
) -> list[KnowledgeHit]:
    """Run `query` (checked), keep the knowledge hits passing `graph`, and place each."""
    store, mode = checked(query)
    if graph.given and store != "knowledge":
        raise MemoryQueryError("loc, type, tags and memory filter the knowledge store only")
    if not graph.given:
        hits = await run_search(conn, agent_id, query, bm25, weights)
    else:
        ranking = _Ranking(bm25, weights or RelevanceWeights())
        hits = await _deepened(conn, agent_id, query, mode, graph, ranking)
        if mode is SearchMode.RELEVANCE:  # what is returned counts as used, not what was read
            await knowledge_relevance.reinforce(conn, [hit.source.id for hit in hits])
    if store != "knowledge" or not hits:
        return [KnowledgeHit(hit, None) for hit in hits]
    placed = await _places(conn, [hit.source.id for hit in hits])
    return [KnowledgeHit(hit, placed.get(hit.source.id)) for hit in hits]


@dataclass(frozen=True, slots=True)
class _Ranking:
    bm25: KnowledgeBm25
    weights: RelevanceWeights


async def _deepened(
    conn: Connection,
    agent_id: str,
    query: MemoryQuery,
    mode: SearchMode,
    graph: GraphFilter,
    ranking: _Ranking,
) -> list[MemoryHit]:
    kept: list[MemoryHit] = []
    for depth in DEPTHS:
        depth = max(depth, query.limit)
        hits = await _ranked(conn, agent_id, query, mode, depth, ranking)
        allowed = await knowledge_graph.passing(conn, [hit.source.id for hit in hits], graph)
        kept = [hit for hit in hits if hit.source.id in allowed]
        if len(kept) >= query.limit or (mode is SearchMode.TEXT and len(hits) < depth):
            break  # enough passed, or the ranking has nothing deeper (an HNSW scan may
            # return fewer rows than asked with more left: vector modes read on)
    return kept[: query.limit]


async def _ranked(
    conn: Connection,
    agent_id: str,
    query: MemoryQuery,
    mode: SearchMode,
    depth: int,
    ranking: _Ranking,
) -> list[MemoryHit]:
    """The knowledge store's top `depth` for `query` (past the tool's limit: this is choird's
    own read, filtered before anything is answered)."""
    if mode is SearchMode.TEXT:
        ranked = await ranking.bm25.top(conn, agent_id, query.text, depth)
        return await memory_search.knowledge_hits(conn, agent_id, ranked)
    if mode is SearchMode.RELEVANCE:
        return await relevance_search(
            conn,
            agent_id,
            query.text,
            query.vector,
            depth,
            bm25=ranking.bm25,
            weights=ranking.weights,
            reinforce=False,
        )
    assert query.vector is not None
    # The HNSW index returns at most ef_search rows: as deep as the read.
    await conn.execute(f"SET LOCAL hnsw.ef_search = {depth:d}")
    if mode is SearchMode.SEMANTIC:
        return await memory_search.semantic(conn, agent_id, "knowledge", query.vector, depth)
    return await memory_search.hybrid(conn, agent_id, "knowledge", query.text, query.vector, depth)


async def _places(conn: Connection, ids: Sequence[UUID]) -> dict[UUID, Placed]:
    rows = await conn.fetch(_GRAPH, list(ids))
    return {
        row["id"]: Placed(
            loc=row["loc"],
            type=ItemType(row["type"]),
            tags=tuple(tag for tag in row["tags"] if isinstance(tag, str)),
            memory_class=row["memory_class"],
        )
        for row in rows
    }
