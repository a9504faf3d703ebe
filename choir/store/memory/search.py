"""Search over an agent's session memory or knowledge (§11.7, §23.4): the SQL of every mode.

- semantic: the HNSW index's nearest vectors (cosine); score is the cosine similarity.
- text: for knowledge, BM25 over name and text (`choir.core.memory.knowledge.bm25`, in memory: this
reads
  the ranked rows, `knowledge_hits`); for session memory, GIN full-text
  matches ranked by `ts_rank` over 1 + log(length) (`ts_rank_cd`, the
  cover-density rank, cost ten times as much per match); `websearch_to_tsquery` syntax ("quoted
  phrases", -exclusions, or). At most `TEXT_CANDIDATES` matches are ranked, so a term found in
  every row costs the same as one found in a thousand: the rest are never read.
- hybrid: reciprocal-rank fusion (Σ 1/(k + rank), k = 60) of the text and vector top lists.
- session detail: text search over one session's `long_term_detail` chunks, or all of them in
  order when there is no query text (the drill-down of §23.4).

One statement per search (one round trip); the caller sets `hnsw.ef_search` (`run_as_agent`).
Session searches read `mid_term` and `long_term_summary` chunks: the only ones with vectors.
Functions take a connection already running as the agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeAlias
from uuid import UUID

import numpy as np
import numpy.typing as npt
from asyncpg import Record
from pgvector import Vector as PgVector

from choir.core.memory.chunks import ChunkKind, Tier
from choir.core.memory.knowledge import bm25
from choir.store.postgres.jsonb_safe import decode_text
from choir.store.postgres.pool import Connection

TEXT_CANDIDATES: Final = 1000
"""Most text matches ranked per query: bounds a common term's cost (uncapped, ranking every
match of a common term took 176 ms p99 at 100k rows)."""
RRF_K: Final = 60
"""Reciprocal-rank fusion's constant (Cormack et al.): damps the weight of the top ranks."""
HYBRID_CANDIDATES: Final = 50
"""How deep each of the two lists goes before fusion (at least the asked limit)."""

StoreName: TypeAlias = Literal["session", "knowledge"]


@dataclass(frozen=True, slots=True)
class HitSource:
    """Where a hit comes from: enough to cite it and to open it."""

    agent_id: str
    store: StoreName
    id: UUID
    session_id: str | None = None
    tier: Tier | None = None
    kind: ChunkKind | None = None
    first_rev: int | None = None
    last_rev: int | None = None
    """The session events the chunk was cut from (None for summaries and knowledge)."""
    name: str | None = None
    """A knowledge item's name."""
    owner_user: str = ""
    """The user whose row or item it is (a personal item's, or one derived from that user's
    session; "": nobody's): only that user's sessions, and the operator, see it."""


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result."""

    text: str
    score: float
    """Higher is better; its scale depends on the mode (cosine, ts_rank, fused rank)."""
    source: HitSource


@dataclass(frozen=True, slots=True)
class _Corpus:
    documents: str
    embeddings: str
    columns: str
    searched: str
    words: str = "tsv"
    """The tsvector text matching reads: a knowledge item's `terms` are its name and text (as
    its BM25 ranking has them), so an item is found by its name in every mode, an encrypted
    one (whose stored text is a placeholder) too."""


_SESSION: Final = _Corpus(
    "memory_documents",
    "memory_embeddings",
    "d.session_id, d.tier, d.kind, d.first_rev, d.last_rev, NULL::text AS name, d.owner_user",
    "d.tier IN ('mid_term', 'long_term_summary')",
)
_KNOWLEDGE: Final = _Corpus(
    "knowledge_documents",
    "knowledge_embeddings",
    "NULL::text AS session_id, NULL::text AS tier, NULL::text AS kind, "
    "NULL::bigint AS first_rev, NULL::bigint AS last_rev, d.name, d.owner_user",
    "true",
    "terms",
)
CORPORA: Final = {"session": _SESSION, "knowledge": _KNOWLEDGE}

# The nearest vectors first, then their rows: written this way the HNSW index always serves
# the ORDER BY ... LIMIT, whatever the join. `{searched}` never drops a nearest row (only
# searched tiers have vectors); it is there so that a stray vector could not leak a detail.
_SEMANTIC: Final = """
SELECT {columns}, d.id, d.text, 1 - n.distance AS score
FROM (SELECT document_id AS id, embedding <=> $1 AS distance FROM {embeddings}
      ORDER BY embedding <=> $1 LIMIT $2) AS n
JOIN {documents} d ON d.id = n.id
WHERE {searched}
ORDER BY n.distance
"""

# The innermost LIMIT stops reading matches at the cap; only those are ranked.
_TEXT: Final = """
SELECT {columns}, d.id, d.text, m.rank AS score
FROM (SELECT c.id, ts_rank(c.words, q.query, 1) AS rank
      FROM (SELECT d.id, d.{words} AS words FROM {documents} d
            WHERE d.{words} @@ websearch_to_tsquery('english', $1) AND {searched}
            LIMIT {candidates}) AS c,
           websearch_to_tsquery('english', $1) AS q (query)
      ORDER BY rank DESC, c.id LIMIT $2) AS m
JOIN {documents} d ON d.id = m.id
ORDER BY m.rank DESC, d.id
"""

_HYBRID: Final = """
WITH near AS (
    SELECT id, row_number() OVER (ORDER BY distance, id) AS rank
    FROM (SELECT document_id AS id, embedding <=> $1 AS distance FROM {embeddings}
          ORDER BY embedding <=> $1 LIMIT $4) AS n
),
matched AS (
    SELECT c.id, row_number() OVER (ORDER BY ts_rank(c.words, q.query, 1) DESC, c.id) AS rank
    FROM (SELECT d.id, d.{words} AS words FROM {documents} d
          WHERE d.{words} @@ websearch_to_tsquery('english', $2) AND {searched}
          LIMIT {candidates}) AS c,
         websearch_to_tsquery('english', $2) AS q (query)
),
fused AS (
    SELECT coalesce(n.id, m.id) AS id,
           coalesce(1.0 / ($5 + n.rank), 0) + coalesce(1.0 / ($5 + m.rank), 0) AS score
    FROM near n FULL JOIN (SELECT id, rank FROM matched WHERE rank <= $4) AS m ON n.id = m.id
    ORDER BY score DESC, id LIMIT $3
)
SELECT {columns}, d.id, d.text, f.score
FROM fused f JOIN {documents} d ON d.id = f.id
WHERE {searched}
ORDER BY f.score DESC, d.id
"""

_DETAIL_TEXT: Final = """
SELECT {columns}, d.id, d.text, ts_rank(d.tsv, q.query, 1) AS score
FROM memory_documents d, websearch_to_tsquery('english', $2) AS q (query)
WHERE d.session_id = $1 AND d.tier = 'long_term_detail' AND d.tsv @@ q.query
ORDER BY score DESC, d.chunk_index LIMIT $3
"""
_DETAIL_ALL: Final = """
SELECT {columns}, d.id, d.text, 0.0::real AS score
FROM memory_documents d WHERE d.session_id = $1 AND d.tier = 'long_term_detail'
ORDER BY d.chunk_index LIMIT $2
"""


def _sql(template: str, corpus: _Corpus) -> str:
    return template.format(
        columns=corpus.columns,
        documents=corpus.documents,
        embeddings=corpus.embeddings,
        searched=corpus.searched,
        words=corpus.words,
        candidates=TEXT_CANDIDATES,
    )


# Knowledge text search ranks by BM25 in memory (`choir.core.memory.knowledge.bm25`, kept current by
# `choir.daemon.memory.search.bm25_index`); this reads the ranked items' rows, in one statement.
_KNOWLEDGE_ROWS: Final = """
SELECT {columns}, d.id, d.text, 0.0::float8 AS score
FROM knowledge_documents d WHERE d.id = ANY($1::uuid[])
"""
BM25_K1: Final = bm25.K1
BM25_B: Final = bm25.B

QUERIES: Final = {  # the statement of each (store, mode); tests EXPLAIN them
    (store, name): _sql(template, corpus)
    for store, corpus in CORPORA.items()
    for name, template in (("semantic", _SEMANTIC), ("text", _TEXT), ("hybrid", _HYBRID))
    if (store, name) != ("knowledge", "text")
}
_ROWS: Final = _sql(_KNOWLEDGE_ROWS, _KNOWLEDGE)
_DETAIL: Final = {
    True: _sql(_DETAIL_TEXT, _SESSION),
    False: _sql(_DETAIL_ALL, _SESSION),
}


async def semantic(
    conn: Connection, agent_id: str, store: StoreName, vector: npt.NDArray[np.float32], limit: int
) -> list[MemoryHit]:
    """The `limit` nearest rows to `vector`."""
    rows = await conn.fetch(QUERIES[store, "semantic"], PgVector(vector), limit)
    return [_hit(agent_id, store, row) for row in rows]


async def text(conn: Connection, agent_id: str, query: str, limit: int) -> list[MemoryHit]:
    """The `limit` best full-text matches of `query` in session memory, among the capped
    candidates by `ts_rank` (knowledge ranks by BM25: `knowledge_hits`)."""
    rows = await conn.fetch(QUERIES["session", "text"], query, limit)
    return [_hit(agent_id, "session", row) for row in rows]


async def knowledge_hits(
    conn: Connection, agent_id: str, ranked: Sequence[tuple[UUID, float]]
) -> list[MemoryHit]:
    """The knowledge items of `ranked` (id, score) as hits, in its order; an item removed since
    it was ranked is left out."""
    rows = {row["id"]: row for row in await conn.fetch(_ROWS, [item_id for item_id, _ in ranked])}
    return ranked_hits(agent_id, rows, ranked)


KNOWLEDGE_COLUMNS: Final = _KNOWLEDGE.columns + ", d.id, d.text, 0.0::float8 AS score"
"""What a statement reads (from `knowledge_documents d`) for `ranked_hits` to make hits."""


def ranked_hits(
    agent_id: str, rows: Mapping[UUID, Record], ranked: Sequence[tuple[UUID, float]]
) -> list[MemoryHit]:
    """The hits of `ranked` (id, score), in its order, from `rows` (by id) of
    `KNOWLEDGE_COLUMNS`; an id without a row is left out."""
    return [
        replace(_hit(agent_id, "knowledge", rows[item_id]), score=score)
        for item_id, score in ranked
        if item_id in rows
    ]


async def hybrid(
    conn: Connection,
    agent_id: str,
    store: StoreName,
    query: str,
    vector: npt.NDArray[np.float32],
    limit: int,
) -> list[MemoryHit]:
    """Text and vector top lists fused by reciprocal rank."""
    depth = max(limit, HYBRID_CANDIDATES)
    rows = await conn.fetch(QUERIES[store, "hybrid"], PgVector(vector), query, limit, depth, RRF_K)
    return [_hit(agent_id, store, row) for row in rows]


async def session_detail(
    conn: Connection, agent_id: str, session_id: str, query: str, limit: int
) -> list[MemoryHit]:
    """A promoted session's detail chunks matching `query`, or all of them in order."""
    if query.strip():
        rows = await conn.fetch(_DETAIL[True], session_id, query, limit)
    else:
        rows = await conn.fetch(_DETAIL[False], session_id, limit)
    return [_hit(agent_id, "session", row) for row in rows]


def _hit(agent_id: str, store: StoreName, row: Record) -> MemoryHit:
    return MemoryHit(
        text=decode_text(row["text"]),
        score=float(row["score"]),
        source=HitSource(
            agent_id=agent_id,
            store=store,
            id=row["id"],
            session_id=row["session_id"],
            tier=Tier(row["tier"]) if row["tier"] else None,
            kind=ChunkKind(row["kind"]) if row["kind"] else None,
            first_rev=row["first_rev"],
            last_rev=row["last_rev"],
            name=row["name"],
            owner_user=row["owner_user"],
        ),
    )
