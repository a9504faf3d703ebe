"""Knowledge search by relevance (design 004): BM25, vectors, recency of use and importance.

One transaction (the search's): the in-memory BM25 index is caught up and gives the query's
best matches; one statement adds the query vector's nearest items and reads every candidate's
signals; the formula (`choir.core.memory.knowledge.relevance`) orders them; the items returned
count one access each (reinforcement) before the transaction commits — a search that fails counts
none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from choir.core.memory.knowledge import relevance
from choir.core.memory.knowledge.relevance import Candidate, RelevanceWeights
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.search.bm25_index import KnowledgeBm25
from choir.store.knowledge import relevance as knowledge_relevance
from choir.store.memory import search as memory_search
from choir.store.memory.search import MemoryHit
from choir.store.postgres.pool import Connection

CANDIDATES: Final = 50
"""How deep the BM25 and the vector lists go before relevance orders their union (at least the
asked limit): an item beyond both is no match for the query, however recent or important."""


async def relevance_search(
    conn: Connection,
    agent_id: str,
    text: str,
    vector: Vector | None,
    limit: int,
    *,
    bm25: KnowledgeBm25,
    weights: RelevanceWeights,
    reinforce: bool = True,
    admit: Callable[[Candidate], bool] | None = None,
) -> list[MemoryHit]:
    """The `limit` most relevant knowledge items for `text` (and its `vector`, when embedded);
    each returned item's access is counted (`reinforce`; False: the caller filters them first
    and counts what it returns); `admit` leaves out candidates before they are ranked."""
    depth = max(limit, CANDIDATES)
    index, terms = await bm25.current(conn, agent_id, text)
    scored = index.scored(terms)  # before the next await: a concurrent search may update it
    best = dict(scored.top(depth))
    signals = await knowledge_relevance.candidates(conn, list(best), vector, depth)
    scores = best | scored.of(i for i in signals if i not in best)
    candidates = [s.candidate(i, scores.get(i, 0.0)) for i, s in signals.items()]
    if admit is not None:
        candidates = [c for c in candidates if admit(c)]
    rows = {item_id: s.row for item_id, s in signals.items()}
    hits = memory_search.ranked_hits(agent_id, rows, relevance.ranked(candidates, weights, limit))
    if reinforce:
        await knowledge_relevance.reinforce(conn, [hit.source.id for hit in hits])
    return hits
