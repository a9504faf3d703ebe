"""Knowledge search by relevance (design 004) on real Postgres: BM25 and vector matches ordered
by the weighted formula (weights as config gives them), kinds setting importance, last access
and access count setting the temporal score, every returned item counted once per search — and
a search killed before it commits counting nothing."""

from __future__ import annotations

import asyncio

import pytest

from choir.core.memory.knowledge.relevance import RelevanceWeights
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import UnavailableError, UsageError
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.support import vec
from tests.memory.store.test_faults import kill_the_waiting_backend

ITEMS = {  # name: (text, kind)
    "host.task": ("Task: move the deploy host off castor.", "task"),
    "host.fact": ("The deploy host is castor.", "fact"),
    "host.pref": ("The user prefers deploys from the castor host at night.", "preference"),
    "host.fix": ("Correction: the deploy host is pollux now, not castor.", "correction"),
    "office": ("The printer is on floor two.", "fact"),
}


def relevance(text: str, limit: int = 10, vector: object = None) -> MemoryQuery:
    return MemoryQuery(store="knowledge", mode="relevance", text=text, vector=vector, limit=limit)  # type: ignore[arg-type]


async def fill(store: PostgresMemoryStore, agent_id: str) -> None:
    for name, (text, kind) in ITEMS.items():
        await store.add_knowledge(agent_id, text, name=name, kind=kind)


async def access(pool: Pool, agent_id: str) -> dict[str, int]:
    schema = quote_ident(agent_schema(agent_id))
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            f"SELECT d.name, coalesce(a.access_count, 0) AS n FROM {schema}.knowledge_documents d "
            f"LEFT JOIN {schema}.knowledge_access a ON a.document_id = d.id"
        )
    return {row["name"]: row["n"] for row in rows}


async def test_importance_orders_matches_by_kind_and_never_adds_a_non_match(
    pool: Pool, ada: str
) -> None:
    store = PostgresMemoryStore(pool, weights=lambda: RelevanceWeights(0, 0, 0, 1))
    await fill(store, ada)
    hits = await store.search(ada, relevance("castor deploy host"))
    assert [h.source.name for h in hits] == ["host.fix", "host.pref", "host.fact", "host.task"]
    assert hits[0].score == pytest.approx(0.9)


async def test_bm25_weight_alone_is_bm25_order_normalised(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool, weights=lambda: RelevanceWeights(1, 0, 0, 0))
    await fill(store, ada)
    text_hits = await store.search(
        ada, MemoryQuery(store="knowledge", mode="text", text="castor night")
    )
    hits = await store.search(ada, relevance("castor night"))
    assert [h.source.name for h in hits] == [h.source.name for h in text_hits]
    best = text_hits[0].score
    assert [h.score for h in hits] == pytest.approx([h.score / best for h in text_hits])


async def test_recent_use_ranks_first_and_returned_items_count_as_used(
    pool: Pool, ada: str
) -> None:
    store = PostgresMemoryStore(pool, weights=lambda: RelevanceWeights(0, 0, 1, 0))
    await fill(store, ada)
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as conn:  # every item last written 30 days ago but host.task
        await conn.execute(
            f"UPDATE {schema}.knowledge_documents SET updated_at = now() - interval '30 days' "
            "WHERE name <> 'host.task'"
        )
    hits = await store.search(ada, relevance("castor", limit=2))
    assert hits[0].source.name == "host.task"
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)  # e^0 x (1 + 0.02 x 0)
    assert hits[1].score == pytest.approx(2.718281828 ** (-0.05 * 30), rel=1e-3)
    used = {h.source.name for h in hits}
    assert await access(pool, ada) == {name: int(name in used) for name in ITEMS}

    again = await store.search(ada, relevance("castor", limit=2))
    assert {h.source.name for h in again} == used  # both used once, just now: 1 x 1.02
    assert [h.score for h in again] == pytest.approx([1.02, 1.02], abs=1e-3)
    assert await access(pool, ada) == {name: 2 * int(name in used) for name in ITEMS}


async def test_a_vector_match_without_the_words_is_a_candidate(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool)  # design 004's weights
    await fill(store, ada)
    printer = await store.get_knowledge(ada, "office")
    fact = await store.get_knowledge(ada, "host.fact")
    await store.set_vectors(ada, "knowledge", [(printer.id, vec(1, 0, 0)), (fact.id, vec(0, 1, 0))])
    hits = await store.search(ada, relevance("where to print", vector=vec(1, 0.1, 0)))
    assert hits[0].source.name == "office"  # no query term, the nearest meaning
    without = await store.search(ada, relevance("where to print"))
    assert without == []  # no vector: only text matches are candidates, and none matches


async def test_an_unknown_kind_is_refused_and_nothing_is_written(
    store: PostgresMemoryStore, ada: str
) -> None:
    with pytest.raises(UsageError, match="unknown knowledge kind 'rumour': use correction"):
        await store.add_knowledge(ada, "Maybe castor.", name="rumour", kind="rumour")
    assert await store.list_knowledge(ada, limit=10) == []
    item = await store.put_knowledge(ada, "The deploy host is castor.", name="h", kind="task")
    await store.write_knowledge(ada, "h", "The deploy host is pollux.", kind="correction")
    assert item.name == "h"


async def test_a_search_killed_before_it_commits_counts_no_access(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool)
    await fill(store, ada)
    await store.search(ada, relevance("castor"))
    counted = await access(pool, ada)
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        holder = admin.transaction()
        await holder.start()
        # the search has ranked and read its hits when its reinforcement waits on these rows
        await admin.execute(f"SELECT FROM {schema}.knowledge_access FOR UPDATE")
        search = asyncio.create_task(store.search(ada, relevance("castor")))
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError, match="memory is unavailable"):
            await search
        await holder.rollback()
    assert await access(pool, ada) == counted
    await store.search(ada, relevance("castor"))
    assert sum((await access(pool, ada)).values()) == sum(counted.values()) + 4
