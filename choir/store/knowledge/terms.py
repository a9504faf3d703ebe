"""What the in-memory BM25 index of an agent's knowledge reads
(`choir.daemon.memory.search.bm25_index`).

The index is a cache of the items' generated `terms` column; Postgres stays the source of truth.
It starts from `all_terms` and keeps current with `changes_since`: the items whose name or text
changed (or that were removed) in transactions it has not seen, from the change log the
`agent-ranking` migration 1 trigger writes in each writing transaction.

Which transactions "it has not seen": each read records its snapshot's xmin (the oldest
transaction still running). Every change committed after that snapshot comes from a transaction
with an id at or above it, so the next read asks for the log rows written by those; a change
read twice is harmless (the item's current terms replace its indexed ones). The log's table oid
comes along so that an agent schema dropped and made again is read afresh, not caught up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from asyncpg import Record

from choir.store.postgres.pool import Connection

# Postgres groups the postings by term (one array of item slots and one of occurrences per
# term, the slot being the item's place in id order): building the index is then one numpy array
# per term, where a row per item took a Python loop over every posting (3x slower at 100k).
_ALL: Final = """
WITH d AS MATERIALIZED (
    SELECT (row_number() OVER (ORDER BY id) - 1)::int AS slot, id, terms, terms_length
    FROM knowledge_documents
)
SELECT NULL::text AS lexeme, array_agg(id ORDER BY slot) AS ids,
       array_agg(terms_length ORDER BY slot) AS lengths, NULL::int[] AS slots, NULL::int[] AS tfs
FROM d
UNION ALL
SELECT u.lexeme, NULL, NULL, array_agg(d.slot), array_agg(cardinality(u.positions))
FROM d, unnest(d.terms) AS u GROUP BY u.lexeme
"""
_MARK: Final = """
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
       'knowledge_term_changes'::regclass::oid::bigint AS log
"""
# One round trip per search: the query's terms, the changes since `$2`, where the log is now.
_CHANGES: Final = """
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
       'knowledge_term_changes'::regclass::oid::bigint AS log,
       (SELECT coalesce(array_agg(DISTINCT lexeme), '{}')
        FROM unnest(to_tsvector('english', $1))) AS query,
       (SELECT json_agg(json_build_array(c.document_id, d.terms_length,
                        (SELECT json_object_agg(u.lexeme, cardinality(u.positions))
                         FROM unnest(d.terms) AS u)))
        FROM knowledge_term_changes c LEFT JOIN knowledge_documents d ON d.id = c.document_id
        WHERE c.changed_by >= $2::text::xid8) AS changes
"""
_QUERY_TERMS: Final = """
SELECT coalesce(array_agg(DISTINCT lexeme), '{}') FROM unnest(to_tsvector('english', $1))
"""


@dataclass(frozen=True, slots=True)
class Mark:
    """Where a read of the log stood: changes from transactions at or after `xmin` are still
    to be read; `log` identifies the log table (a new one means a new schema)."""

    xmin: int
    log: int


@dataclass(frozen=True, slots=True)
class AllTerms:
    """Every item (`ids`, `lengths`: by slot) and each term's postings (term, slots,
    occurrences)."""

    ids: list[UUID]
    lengths: list[int]
    postings: list[tuple[str, list[int], list[int]]]


@dataclass(frozen=True, slots=True)
class ItemTerms:
    """One item's terms as BM25 counts them; `length` None: the item is gone."""

    id: UUID
    terms: dict[str, int]
    length: int | None


@dataclass(frozen=True, slots=True)
class Changes:
    """A search's first read: the query's distinct terms and what changed since a mark."""

    query: list[str]
    items: list[ItemTerms]
    mark: Mark


async def all_terms(conn: Connection) -> tuple[Mark, AllTerms]:
    """Every item's terms, and the mark to catch up from. The mark is read first: a change
    committed between the two reads is read again later, never lost."""
    mark = _one(await conn.fetchrow(_MARK))
    rows = await conn.fetch(_ALL)
    items = next(row for row in rows if row["lexeme"] is None)
    return Mark(mark["xmin"], mark["log"]), AllTerms(
        ids=items["ids"] or [],
        lengths=items["lengths"] or [],
        postings=[(r["lexeme"], r["slots"], r["tfs"]) for r in rows if r["lexeme"] is not None],
    )


async def changes_since(conn: Connection, query: str, mark: Mark) -> Changes:
    """The terms of `query` and the items changed since `mark`, in one statement."""
    row = _one(await conn.fetchrow(_CHANGES, query, str(mark.xmin)))
    changed = row["changes"]  # decoded by the pool's json codec, or text without one
    changed = json.loads(changed) if isinstance(changed, str) else changed or []
    items = [ItemTerms(UUID(item_id), terms or {}, length) for item_id, length, terms in changed]
    return Changes(list(row["query"]), items, Mark(row["xmin"], row["log"]))


async def query_terms(conn: Connection, query: str) -> list[str]:
    """The distinct terms of `query` (Postgres' english analyzer, as the items' terms)."""
    terms: list[str] = await conn.fetchval(_QUERY_TERMS, query)
    return terms


def _one(row: Record | None) -> Record:
    assert row is not None  # a SELECT without FROM returns one row
    return row
