"""What an agent's memory holds (`memory stats`): chunks and sessions per tier, knowledge items,
rows still waiting for a vector, the size of each search index, and the summary tree's depth.

Counting is exact (`count(*)`): it runs on an operator's request, not on a hot path. Runs on a
connection already running as the agent (`run_as_agent`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.core.memory.chunks import Tier
from choir.core.memory.summaries.tree import tree_depth
from choir.store.postgres.pool import Connection

INDEXES: Final = (
    "memory_embeddings_hnsw_idx",
    "knowledge_embeddings_hnsw_idx",
    "memory_documents_tsv_idx",
    "knowledge_documents_tsv_idx",
)
"""The search indexes whose sizes are reported."""

_TIERS: Final = """
SELECT tier, count(*) AS chunks, count(DISTINCT session_id) AS sessions
FROM memory_documents GROUP BY tier
"""

_TOTALS: Final = """
SELECT
    (SELECT count(*) FROM knowledge_documents) AS knowledge,
    (SELECT count(*) FROM memory_documents d
     WHERE d.tier IN ('mid_term', 'long_term_summary')
       AND NOT EXISTS (SELECT FROM memory_embeddings e WHERE e.document_id = d.id))
        AS memory_missing,
    (SELECT count(*) FROM knowledge_documents d
     WHERE NOT EXISTS (SELECT FROM knowledge_embeddings e WHERE e.document_id = d.id)
       AND NOT (d.data ? 'choir_sealed' AND d.data - 'choir_sealed' = '{}'::jsonb))
        AS knowledge_missing,
    (SELECT count(*) FROM knowledge_documents d
     WHERE d.data ? 'choir_sealed' AND d.data - 'choir_sealed' = '{}'::jsonb) AS knowledge_sealed,
    (SELECT count(*) FROM knowledge_documents
     WHERE metadata ?| array['compaction_archive', 'tool_sequence']) AS leaves,
    (SELECT count(*) FROM knowledge_documents WHERE metadata ? 'session_summary') AS branches,
    (SELECT count(DISTINCT s.id) FROM knowledge_documents s
     JOIN knowledge_edges e ON e.source_id = s.id AND e.type = 'derived_from'
     JOIN knowledge_documents a ON a.id = e.target_id
      AND a.metadata ?| array['compaction_archive', 'tool_sequence']
     WHERE s.metadata ? 'session_summary') AS linked,
    (SELECT count(DISTINCT r.id) FROM knowledge_documents r
     JOIN knowledge_edges e ON e.source_id = r.id AND e.type = 'derived_from'
     JOIN knowledge_documents s ON s.id = e.target_id AND s.metadata ? 'session_summary'
     WHERE r.metadata ? 'memory_rollup') AS roots
"""

_INDEX_SIZES: Final = """
SELECT name, pg_relation_size(to_regclass(name)) AS bytes FROM unnest($1::text[]) AS name
"""


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """One agent's memory at a glance."""

    chunks: dict[Tier, int]
    """Chunks per tier (every tier present, 0 when empty)."""
    sessions: dict[Tier, int]
    """Sessions with chunks in each tier."""
    knowledge_items: int
    vectors_missing: int
    """Searchable rows (mid-term, summaries, knowledge) without their embedding yet; never an
    encrypted item, which gets no vector by design (`store.memory.vectors.missing_vectors`)."""
    index_bytes: dict[str, int]
    """On-disk size of each search index (HNSW and GIN), by index name."""
    knowledge_sealed: int = 0
    """Knowledge items of an encrypted memory (sealed): never given a vector, so neither
    covered nor missing in a vector coverage."""
    tree_depth: int = 0
    """Levels of the summary tree (`core.memory.summary_tree.tree_depth`): 0 none, 1 archives
    (or tool sequences) only, 2 session summaries over them, 3 a roll-up over those."""


async def memory_stats(conn: Connection) -> MemoryStats:
    """The counts and index sizes of the agent's memory."""
    tiers = {Tier(row["tier"]): row for row in await conn.fetch(_TIERS)}
    totals = await conn.fetchrow(_TOTALS)
    assert totals is not None
    sizes = await conn.fetch(_INDEX_SIZES, list(INDEXES))
    return MemoryStats(
        chunks={tier: tiers[tier]["chunks"] if tier in tiers else 0 for tier in Tier},
        sessions={tier: tiers[tier]["sessions"] if tier in tiers else 0 for tier in Tier},
        knowledge_items=totals["knowledge"],
        vectors_missing=totals["memory_missing"] + totals["knowledge_missing"],
        index_bytes={row["name"]: row["bytes"] or 0 for row in sizes},
        knowledge_sealed=totals["knowledge_sealed"],
        tree_depth=tree_depth(
            totals["leaves"], totals["branches"], totals["linked"], totals["roots"]
        ),
    )
