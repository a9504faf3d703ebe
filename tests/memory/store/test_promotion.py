"""Promotion to long-term memory (§11.5): summaries in, event chunks to detail, vectors out."""

from __future__ import annotations

from choir.core.memory.chunks import Tier
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.memory.chunks import ChunkRef
from tests.memory.store.support import event_chunks, summary_chunks, vec

EVENTS = ["ran the migration on staging", "the migration locked the orders table", "rolled back"]
SUMMARY = ["staging migration locked orders; rolled back, needs a concurrent index"]


async def closed_session(
    store: PostgresMemoryStore, agent_id: str, session_id: str
) -> list[ChunkRef]:
    refs = await store.add_session_chunks(agent_id, session_id, Tier.MID_TERM, event_chunks(EVENTS))
    await store.set_vectors(agent_id, "memory", [(r.id, vec(1, 0, n)) for n, r in enumerate(refs)])
    return refs


async def test_mid_term_sessions_are_listed_oldest_first(
    store: PostgresMemoryStore, ada: str
) -> None:
    for session_id in ("s-b", "s-a", "s-c"):
        await store.add_session_chunks(ada, session_id, Tier.MID_TERM, event_chunks(["x"]))
    assert await store.mid_term_sessions(ada) == ["s-b", "s-a", "s-c"]
    await store.promote_session(ada, "s-a", [])
    assert await store.mid_term_sessions(ada) == ["s-b", "s-c"]


async def test_promotion_drops_the_event_vectors_and_makes_the_summary_searchable(
    store: PostgresMemoryStore, ada: str
) -> None:
    events = await closed_session(store, ada, "s1")
    summary = await store.promote_session(ada, "s1", summary_chunks(SUMMARY))
    await store.set_vectors(ada, "memory", [(summary[0].id, vec(0, 1, 0))])

    stats = await store.stats(ada)
    assert stats.chunks == {Tier.MID_TERM: 0, Tier.LONG_TERM_SUMMARY: 1, Tier.LONG_TERM_DETAIL: 3}
    assert stats.vectors_missing == 0
    semantic = await store.search(ada, MemoryQuery(mode="semantic", vector=vec(1, 0, 0)))
    assert [h.source.id for h in semantic] == [summary[0].id]  # the event vectors are gone
    text = await store.search(ada, MemoryQuery(mode="text", text="migration"))
    assert [(h.source.id, h.source.tier) for h in text] == [(summary[0].id, Tier.LONG_TERM_SUMMARY)]

    drill = await store.search(
        ada, MemoryQuery(mode="session_detail", session_id="s1", text="migration")
    )
    assert {h.source.id for h in drill} == {events[0].id, events[1].id}
    assert {h.source.tier for h in drill} == {Tier.LONG_TERM_DETAIL}
    everything = await store.search(ada, MemoryQuery(mode="session_detail", session_id="s1"))
    assert [h.text for h in everything] == EVENTS


async def test_promoting_again_changes_nothing(store: PostgresMemoryStore, ada: str) -> None:
    await closed_session(store, ada, "s1")
    first = await store.promote_session(ada, "s1", summary_chunks(SUMMARY))
    before = await store.stats(ada)

    again = await store.promote_session(ada, "s1", summary_chunks(SUMMARY))

    assert [(r.id, r.new) for r in again] == [(first[0].id, False)]
    assert await store.stats(ada) == before


async def test_a_session_without_summary_keeps_its_detail_only(
    store: PostgresMemoryStore, ada: str
) -> None:
    await closed_session(store, ada, "s1")
    assert await store.promote_session(ada, "s1", []) == []
    stats = await store.stats(ada)
    assert stats.chunks[Tier.LONG_TERM_DETAIL] == 3
    assert stats.sessions == {Tier.MID_TERM: 0, Tier.LONG_TERM_SUMMARY: 0, Tier.LONG_TERM_DETAIL: 1}


async def test_stats_count_tiers_knowledge_missing_vectors_and_index_sizes(
    store: PostgresMemoryStore, ada: str
) -> None:
    await closed_session(store, ada, "s1")
    await store.add_session_chunks(ada, "s2", Tier.MID_TERM, event_chunks(["no vector yet"]))
    await store.put_knowledge(ada, "a note")

    stats = await store.stats(ada)

    assert stats.chunks == {Tier.MID_TERM: 4, Tier.LONG_TERM_SUMMARY: 0, Tier.LONG_TERM_DETAIL: 0}
    assert stats.sessions[Tier.MID_TERM] == 2
    assert (stats.knowledge_items, stats.vectors_missing) == (1, 2)
    assert set(stats.index_bytes) == {
        "memory_embeddings_hnsw_idx",
        "knowledge_embeddings_hnsw_idx",
        "memory_documents_tsv_idx",
        "knowledge_documents_tsv_idx",
    }
    assert all(size > 0 for size in stats.index_bytes.values())
