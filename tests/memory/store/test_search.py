"""Search: every mode of both stores, the text cap, hybrid fusion, and bad queries refused."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from choir.core.memory.chunks import ChunkKind, Tier
from choir.core.memory.knowledge.graph import ItemFields
from choir.core.memory.sealed_items import seal_item
from choir.core.memory.sealing import NONCE_BYTES
from choir.daemon.memory.search.query import MemoryQuery, MemoryQueryError
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import run_as_agent
from choir.store.memory.search import QUERIES, TEXT_CANDIDATES
from choir.store.postgres.pool import Pool
from tests.memory.store.support import event_chunks, vec


async def test_text_search_ranks_matches_and_cites_the_source(
    store: PostgresMemoryStore, ada: str
) -> None:
    refs = await store.add_session_chunks(
        ada,
        "s1",
        Tier.MID_TERM,
        event_chunks(
            ["deploy failed: deploy key missing", "lunch order", "deploy failed: ssh key missing"]
        ),
    )
    hits = await store.search(ada, MemoryQuery(mode="text", text="deploy"))

    assert [h.source.id for h in hits] == [refs[0].id, refs[2].id]
    assert hits[0].score > hits[1].score > 0
    source = hits[0].source
    assert (source.agent_id, source.store, source.session_id, source.tier, source.kind) == (
        ada,
        "session",
        "s1",
        Tier.MID_TERM,
        ChunkKind.TOOL_CALL,
    )
    assert (source.first_rev, source.last_rev, source.name) == (1, 1, None)


async def test_semantic_search_orders_by_cosine_similarity(
    store: PostgresMemoryStore, ada: str
) -> None:
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(["a", "b", "c"]))
    await store.set_vectors(
        ada,
        "memory",
        [(refs[0].id, vec(1, 0, 0)), (refs[1].id, vec(0.8, 0.6, 0)), (refs[2].id, vec(0, 0, 1))],
    )
    hits = await store.search(ada, MemoryQuery(mode="semantic", vector=vec(1, 0, 0), limit=2))

    assert [h.source.id for h in hits] == [refs[0].id, refs[1].id]
    assert [round(h.score, 4) for h in hits] == [1.0, 0.8]


async def test_knowledge_search_carries_the_key(store: PostgresMemoryStore, ada: str) -> None:
    item = await store.put_knowledge(ada, "the user prefers tea over coffee", name="user.drink")
    await store.put_knowledge(ada, "the office has a coffee machine")
    await store.set_vectors(ada, "knowledge", [(item.id, vec(0, 1, 0))])

    text_hits = await store.search(ada, MemoryQuery(store="knowledge", mode="text", text="tea"))
    vector_hits = await store.search(
        ada, MemoryQuery(store="knowledge", mode="semantic", vector=vec(0, 1, 0))
    )
    assert [h.source.name for h in text_hits] == ["user.drink"]
    assert [(h.source.store, h.source.id, h.source.session_id) for h in vector_hits] == [
        ("knowledge", item.id, None)
    ]


async def test_hybrid_ranks_a_row_both_searches_find_above_rows_only_one_finds(
    store: PostgresMemoryStore, ada: str
) -> None:
    texts = ["release notes drafted", "release checklist: release done", "bought milk", "a walk"]
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(texts))
    ids = [r.id for r in refs]
    await store.set_vectors(
        ada,
        "memory",
        # vector ranks: 2, 1, 3, 0; text ranks ("release"): 1 (twice), 0
        [
            (ids[0], vec(0, 0, 1)),
            (ids[1], vec(0.9, 0.1, 0)),
            (ids[2], vec(1, 0, 0)),
            (ids[3], vec(0.5, 0.5, 0.1)),
        ],
    )
    hits = await store.search(
        ada, MemoryQuery(mode="hybrid", text="release", vector=vec(1, 0, 0), limit=4)
    )

    # first and second in the two lists beats first in one only
    assert [h.source.id for h in hits] == [ids[1], ids[0], ids[2], ids[3]]
    assert [h.score for h in hits] == pytest.approx(
        [1 / 61 + 1 / 62, 1 / 62 + 1 / 64, 1 / 61, 1 / 63]
    )


async def test_a_text_without_vectors_is_still_found_by_hybrid(
    store: PostgresMemoryStore, ada: str
) -> None:
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(["rare zebra"]))
    hits = await store.search(ada, MemoryQuery(mode="hybrid", text="zebra", vector=vec(1, 0, 0)))
    assert [h.source.id for h in hits] == [refs[0].id]


async def test_hybrid_finds_a_knowledge_item_by_its_name_an_encrypted_one_too(
    store: PostgresMemoryStore, ada: str
) -> None:
    """Hybrid's text half reads an item's name and text (its BM25 terms), as text mode does: an
    encrypted item, whose stored text is a placeholder and which has no vector, is found by its
    name in the default mode too."""
    key = secrets.token_bytes(32)
    text, data = seal_item(key, ada, "app", "the door code is 4321", {}, nonce=bytes(NONCE_BYTES))
    door = await store.add_knowledge(ada, text, name="door", fields=ItemFields(data=data))
    plain = await store.add_knowledge(ada, "on floor two", name="printer.location")
    await store.set_vectors(ada, "knowledge", [(plain.id, vec(1, 0, 0))])

    for query, found in (("door", door.id), ("printer", plain.id)):
        hits = await store.search(
            ada, MemoryQuery(store="knowledge", mode="hybrid", text=query, vector=vec(0, 1, 0))
        )
        assert found in [h.source.id for h in hits], query


async def test_a_query_of_stop_words_finds_nothing(store: PostgresMemoryStore, ada: str) -> None:
    await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(["the cat and the dog"]))
    assert await store.search(ada, MemoryQuery(mode="text", text="the and")) == []


def scans_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", []):
        found += scans_of(child, relation)
    return found


async def test_text_search_reads_at_most_the_capped_matches_of_a_common_term(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    total = TEXT_CANDIDATES + 500
    texts = [f"common term number {n}" for n in range(total)]
    await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(texts))

    hits = await store.search(ada, MemoryQuery(mode="text", text="common", limit=5))
    async with pool.acquire() as conn, run_as_agent(conn, ada) as agent:
        await agent.execute("ANALYZE memory_documents")
        explained = await agent.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES["session", "text"], "common", 5
        )
    plan = explained[0]["Plan"]

    assert len(hits) == 5
    scans = scans_of(plan, "memory_documents")
    read = [scan["Actual Rows"] * scan["Actual Loops"] for scan in scans]
    assert read, plan
    assert max(read) <= TEXT_CANDIDATES, read


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (MemoryQuery(store="working"), "unknown memory store 'working': use session or knowledge"),
        (MemoryQuery(mode="fuzzy"), "unknown search mode 'fuzzy' for store session: use semantic"),
        (
            MemoryQuery(store="knowledge", mode="session_detail", session_id="s1"),
            "unknown search mode 'session_detail' for store knowledge",
        ),
        (MemoryQuery(mode="session_detail"), "session_detail needs a session_id"),
        (MemoryQuery(mode="text", text="x", session_id="s1"), "session_id is for mode session"),
        (MemoryQuery(mode="semantic"), "mode semantic needs the query's vector"),
        (MemoryQuery(mode="hybrid", text="x"), "mode hybrid needs the query's vector"),
        (MemoryQuery(mode="text", text="  "), "mode text needs query text"),
        (MemoryQuery(mode="text", text="x", limit=0), "limit must be 1 to 100, not 0"),
        (MemoryQuery(mode="semantic", vector=vec(1, 0)), "the query vector does not fit"),
    ],
)
async def test_bad_queries_are_refused_naming_the_problem(
    store: PostgresMemoryStore, ada: str, query: MemoryQuery, problem: str
) -> None:
    await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(["x"]))
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(["x"]))
    await store.set_vectors(ada, "memory", [(refs[0].id, vec(1, 0, 0))])
    with pytest.raises(MemoryQueryError, match=problem):
        await store.search(ada, query)
