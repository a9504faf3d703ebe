"""How an agent's memory is doing (`memory stats`, `choir.memory.query` mode `stats`).

From seed design 004's `memory_stats`: beside what `choir.store.memory.stats` counts (chunks and
sessions per tier, knowledge, rows without a vector), the share of searchable rows with their
vector, sessions waiting to be put into memory, sessions in memory without the agent's summary,
and the tool calls still without their sentence (`memory backfill-tools`). choir has no summary
tree yet, so no tree depth is reported (none is made up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from choir.core.memory.chunks import Tier
from choir.daemon.memory.store import MemoryStore
from choir.store.memory.closes import pending_closes
from choir.store.memory.stats import MemoryStats
from choir.store.memory.tool_rows import (
    sessions_with_tool_results,
    undescribed,
    unsummarized_sessions,
)
from choir.store.postgres.pool import Pool

PENDING_CAP: Final = 10_000
"""Pending closes are counted up to this many (a home that far behind says `10000`)."""


@dataclass(frozen=True, slots=True)
class MemoryHealth:
    """One agent's memory: its counts and what is still to do."""

    stats: MemoryStats
    vector_coverage: float | None
    """Searchable rows with their vector, 0-1; None when there are none (sealed items, which
    never get one, are not counted)."""
    sessions_pending: int
    sessions_unsummarized: int
    tool_rows: int
    tool_sessions_undescribed: int
    tool_calls_undescribed: int


async def memory_health(pool: Pool, store: MemoryStore, agent_id: str) -> MemoryHealth:
    """The agent's memory counts (as the agent) and its pending work (choir_control)."""
    stats = await store.stats(agent_id)
    described = await store.described_sessions(agent_id)
    tool_rows = await store.tool_row_count(agent_id)
    async with pool.acquire() as conn:
        pending = await pending_closes(conn, [agent_id], agent_id=agent_id, limit=PENDING_CAP)
        unsummarized = await unsummarized_sessions(conn, agent_id)
        closed = await sessions_with_tool_results(conn, agent_id)
    missing = undescribed(closed, described)
    searchable = (  # a sealed item never gets a vector: not a row the coverage is about
        stats.chunks[Tier.MID_TERM]
        + stats.chunks[Tier.LONG_TERM_SUMMARY]
        + stats.knowledge_items
        - stats.knowledge_sealed
    )
    coverage = None if not searchable else round(1 - stats.vectors_missing / searchable, 4)
    return MemoryHealth(
        stats=stats,
        vector_coverage=coverage,
        sessions_pending=len(pending),
        sessions_unsummarized=unsummarized,
        tool_rows=tool_rows,
        tool_sessions_undescribed=len(missing),
        tool_calls_undescribed=sum(s.results for s in missing),
    )
