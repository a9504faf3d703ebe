"""What knowledge relevance search reads and writes (`choir.core.memory.knowledge.relevance`).

`candidates` reads, in one statement, the given items (the query's best BM25 matches) and the
query vector's nearest ones, with what relevance weighs — cosine similarity, days since the last
access (the last write for an item never returned), access count and kind — and what a hit
shows, so the hits need no second read. `reinforce` counts
one access of each returned item, in the search's transaction. Tables: `knowledge_access` and
the `kind` column (`agent-ranking` migration 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from uuid import UUID

import numpy as np
import numpy.typing as npt
from asyncpg import Record
from pgvector import Vector as PgVector

from choir.core.memory.knowledge.relevance import Candidate
from choir.store.memory.search import KNOWLEDGE_COLUMNS
from choir.store.postgres.pool import Connection

_COLUMNS: Final = f"""
SELECT {KNOWLEDGE_COLUMNS}, d.kind AS item_kind, coalesce(a.access_count, 0) AS access_count,
       extract(epoch FROM now() - coalesce(a.last_accessed, d.updated_at)) / 86400 AS days,
       {{similarity}} AS similarity
FROM ids JOIN knowledge_documents d ON d.id = ids.id
LEFT JOIN knowledge_access a ON a.document_id = d.id
{{vectors}}
"""
_BY_IDS: Final = "WITH ids AS (SELECT DISTINCT unnest($1::uuid[]) AS id)" + _COLUMNS.format(
    similarity="NULL::float8", vectors=""
)
# The nearest vectors by the HNSW index (as semantic search reads them), then every candidate's
# similarity from its own vector.
_WITH_NEAREST: Final = """WITH near AS (SELECT document_id AS id FROM knowledge_embeddings
                 ORDER BY embedding <=> $2 LIMIT $3),
ids AS (SELECT unnest($1::uuid[]) AS id UNION SELECT id FROM near)""" + _COLUMNS.format(
    similarity="1 - (e.embedding <=> $2)",
    vectors="LEFT JOIN knowledge_embeddings e ON e.document_id = d.id",
)
# Sorted ids: two searches reinforcing the same items lock their rows in the same order. The
# transaction commits without waiting for its WAL flush (`synchronous_commit` off, for this
# transaction only): a crash may lose the last instants' access counts — a ranking hint — and
# never leaves them half-written, and a search does not wait on the disk.
_REINFORCE: Final = """
INSERT INTO knowledge_access AS a (document_id, access_count, last_accessed)
SELECT d.id, 1, now()
FROM knowledge_documents d, (SELECT set_config('synchronous_commit', 'off', true)) AS s
WHERE d.id = ANY($1::uuid[]) ORDER BY d.id
ON CONFLICT (document_id) DO UPDATE
SET access_count = a.access_count + 1, last_accessed = excluded.last_accessed
"""
_SET_KIND: Final = "UPDATE knowledge_documents SET kind = $2 WHERE id = $1 AND kind <> $2"


@dataclass(frozen=True, slots=True)
class Signals:
    """A candidate's stored signals (its BM25 score is the in-memory index's) and its row."""

    similarity: float | None
    days_since_access: float
    access_count: int
    kind: str
    row: Record
    """The item as `memory_search.ranked_hits` makes a hit of it."""

    def candidate(self, item_id: UUID, bm25: float) -> Candidate:
        return Candidate(
            item_id, bm25, self.similarity, self.days_since_access, self.access_count, self.kind
        )


async def candidates(
    conn: Connection,
    ids: Sequence[UUID],
    vector: npt.NDArray[np.float32] | None,
    nearest: int,
) -> dict[UUID, Signals]:
    """The signals of `ids` and, given a query `vector`, of its `nearest` items too."""
    if vector is None:
        rows = await conn.fetch(_BY_IDS, list(ids))
    else:
        rows = await conn.fetch(_WITH_NEAREST, list(ids), PgVector(vector), nearest)
    return {row["id"]: _signals(row) for row in rows}


async def reinforce(conn: Connection, ids: Sequence[UUID]) -> None:
    """Count one access of each of `ids`, now (ids of items removed meanwhile are skipped)."""
    if ids:
        await conn.execute(_REINFORCE, sorted(ids))


async def set_kind(conn: Connection, item_id: UUID, kind: str) -> None:
    """Give the item `item_id` the kind `kind` (checked by the caller: `check_kind`)."""
    await conn.execute(_SET_KIND, item_id, kind)


def _signals(row: Record) -> Signals:
    similarity = row["similarity"]
    return Signals(
        similarity=float(similarity) if similarity is not None else None,
        days_since_access=float(row["days"]),
        access_count=row["access_count"],
        kind=row["item_kind"],
        row=row,
    )
