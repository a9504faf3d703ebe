"""Each agent's in-memory BM25 index of its knowledge, kept current from Postgres.

    indexes = KnowledgeBm25()
    ranked, terms = await indexes.top(conn, agent_id, "deploy host", limit=10)

The first search of an agent in this choird reads every item's terms (`knowledge_terms.
all_terms`, about a second at 100k items); every search after that first reads, in the same
round trip as the query's own terms, the items changed since its last read (usually none) and
applies them. So a search ranks what its transaction can see, whichever process wrote it (an
operator's `choirctl knowledge`, another choird, a restore), and a choird restarted — or killed
— simply reads everything again: the index holds nothing Postgres does not.

Reads and applies of one agent are serialised by a lock: an older read applied after a newer
one would bring back a replaced item's terms.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from uuid import UUID

from choir.core.memory.knowledge.bm25 import Bm25Index
from choir.store.knowledge import terms as knowledge_terms
from choir.store.knowledge.terms import Mark
from choir.store.postgres.pool import Connection


@dataclass(slots=True)
class _AgentIndex:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    index: Bm25Index | None = None
    mark: Mark | None = None


class KnowledgeBm25:
    """The BM25 indexes of the agents this process searched, one per agent id."""

    def __init__(self) -> None:
        self._agents: dict[str, _AgentIndex] = {}

    async def current(
        self, conn: Connection, agent_id: str, query: str
    ) -> tuple[Bm25Index, list[str]]:
        """`agent_id`'s index, current as of this call, and the terms of `query`. `conn` runs as
        the agent."""
        state = self._agents.setdefault(agent_id, _AgentIndex())
        async with state.lock:
            if state.index is None or state.mark is None:
                await self._build(conn, state)
                assert state.mark is not None
            changes = await knowledge_terms.changes_since(conn, query, state.mark)
            if changes.mark.log != state.mark.log:  # the schema was made again: start over
                await self._build(conn, state)
                return self._index(state), changes.query
            index = self._index(state)
            for item in changes.items:
                if item.length is None:
                    index.remove(item.id)
                else:
                    index.put(item.id, item.terms, item.length)
            state.mark = changes.mark
            return index, changes.query

    def built(self, agent_id: str) -> bool:
        """Whether `agent_id`'s index is in memory (built by a search or a pre-warm)."""
        state = self._agents.get(agent_id)
        return state is not None and state.index is not None

    async def drop(self, agent_id: str, item_id: UUID) -> None:
        """Take a forgotten item out of `agent_id`'s index now, not at its next search (which
        would read its removal from the change log anyway)."""
        state = self._agents.get(agent_id)
        if state is None:
            return
        async with state.lock:
            if state.index is not None:
                state.index.remove(item_id)

    async def top(
        self, conn: Connection, agent_id: str, query: str, limit: int
    ) -> list[tuple[UUID, float]]:
        """The `limit` best BM25 matches of `query` among `agent_id`'s items, best first."""
        index, terms = await self.current(conn, agent_id, query)
        return index.top(terms, limit)

    @staticmethod
    async def _build(conn: Connection, state: _AgentIndex) -> None:
        mark, every = await knowledge_terms.all_terms(conn)
        state.index = Bm25Index.built(every.ids, every.lengths, every.postings)
        state.mark = mark

    @staticmethod
    def _index(state: _AgentIndex) -> Bm25Index:
        assert state.index is not None
        return state.index
