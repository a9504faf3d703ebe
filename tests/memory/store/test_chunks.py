"""Session chunks (tiers 2-3) and their vectors: idempotent storing, dimension checks, backfill."""

from __future__ import annotations

from uuid import UUID

import asyncpg
import numpy as np
import pytest

from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import UsageError
from choir.store.memory.vectors import VectorRefused
from choir.store.postgres.pool import Pool
from tests.memory.store.support import event_chunks, summary_chunks, vec

TEXTS = ["ran pytest: 3 failed", "read config.py", "user asked for a release note"]


async def rows_of(pool: Pool, agent_id: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            f"SELECT session_id, tier, chunk_index, text, kind, first_rev, last_rev "
            f'FROM "choir_{agent_id}".memory_documents ORDER BY session_id, tier, chunk_index'
        )


async def test_chunks_are_stored_with_their_provenance(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    refs = await store.add_session_chunks(
        ada, "s1", Tier.MID_TERM, event_chunks(TEXTS, first_rev=7)
    )

    assert [(r.index, r.tier, r.text, r.new) for r in refs] == [
        (n, Tier.MID_TERM, text, True) for n, text in enumerate(TEXTS)
    ]
    rows = await rows_of(pool, ada)
    assert [(r["chunk_index"], r["kind"], r["first_rev"], r["last_rev"]) for r in rows] == [
        (0, "tool_call", 7, 7),
        (1, "tool_call", 8, 8),
        (2, "tool_call", 9, 9),
    ]


async def test_storing_a_sessions_chunks_again_stores_nothing_and_answers_the_same_ids(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    first = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:2]))
    again = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))

    assert [r.id for r in again[:2]] == [r.id for r in first]
    assert [r.new for r in again] == [False, False, True]
    assert len(await rows_of(pool, ada)) == 3
    rerun = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
    assert [r.id for r in rerun] == [r.id for r in again]
    assert not any(r.new for r in rerun)


async def test_storing_a_promoted_sessions_event_chunks_again_is_a_no_op(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    stored = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
    await store.promote_session(ada, "s1", summary_chunks(["fixed the tests"]))

    again = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))

    assert [(r.id, r.tier, r.new) for r in again] == [
        (r.id, Tier.LONG_TERM_DETAIL, False) for r in stored
    ]
    assert len(await rows_of(pool, ada)) == 4


async def test_the_same_index_in_another_session_or_tier_is_another_chunk(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:1]))
    await store.add_session_chunks(ada, "s2", Tier.MID_TERM, event_chunks(TEXTS[:1]))
    await store.add_session_chunks(ada, "s1", Tier.LONG_TERM_SUMMARY, summary_chunks(["sum"]))
    assert len(await rows_of(pool, ada)) == 3


async def test_duplicate_indexes_in_one_call_are_refused(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    chunks = [MemoryChunk(0, "a", ChunkKind.MESSAGES), MemoryChunk(0, "b", ChunkKind.MESSAGES)]
    with pytest.raises(UsageError, match="distinct indexes"):
        await store.add_session_chunks(ada, "s1", Tier.MID_TERM, chunks)
    assert await rows_of(pool, ada) == []


async def test_vectors_are_written_and_replaced(store: PostgresMemoryStore, ada: str) -> None:
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
    written = await store.set_vectors(
        ada, "memory", [(refs[0].id, vec(1, 0, 0)), (str(refs[1].id), vec(0, 1, 0))]
    )
    assert written == 2
    assert [m.id for m in await store.missing_vectors(ada, limit=10)] == [refs[2].id]
    # the latest vector of an id wins, in one batch or across batches
    await store.set_vectors(ada, "memory", [(refs[2].id, vec(1, 1, 0)), (refs[2].id, vec(0, 0, 1))])
    hits = await semantic_ids(store, ada, vec(0, 0, 1))
    assert hits[0] == refs[2].id
    assert await store.missing_vectors(ada, limit=10) == []


async def semantic_ids(store: PostgresMemoryStore, agent_id: str, query: Vector) -> list[UUID]:
    hits = await store.search(agent_id, MemoryQuery(mode="semantic", vector=query))
    return [h.source.id for h in hits]


@pytest.mark.parametrize(
    ("vectors", "problem"),
    [
        ([vec(1, 0)], "vectors of 2 dimensions refused: the agent's memory embeddings have 3"),
        ([vec(1, 0, 0), vec(1, 0, 0, 0)], "vectors of 4 dimensions refused"),
        ([np.zeros((3, 1), dtype=np.float32)], "one-dimensional"),
        ([vec(1, float("nan"), 0)], "NaN"),
    ],
)
async def test_a_bad_vector_refuses_the_whole_batch(
    store: PostgresMemoryStore, ada: str, vectors: list[np.ndarray], problem: str
) -> None:
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:2]))
    batch = list(zip([r.id for r in refs], vectors, strict=False))
    with pytest.raises(VectorRefused, match=problem):
        await store.set_vectors(ada, "memory", batch)
    assert len(await store.missing_vectors(ada, limit=10)) == 2


async def test_vectors_of_deleted_or_promoted_rows_are_skipped(
    store: PostgresMemoryStore, ada: str
) -> None:
    gone = await store.put_knowledge(ada, "soon deleted")
    kept = await store.put_knowledge(ada, "kept")
    await store.delete_knowledge(ada, gone.id)
    written = await store.set_vectors(
        ada, "knowledge", [(gone.id, vec(1, 0, 0)), (kept.id, vec(0, 1, 0))]
    )
    assert written == 1

    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:1]))
    await store.promote_session(ada, "s1", [])
    assert await store.set_vectors(ada, "memory", [(refs[0].id, vec(1, 0, 0))]) == 0


async def test_a_bad_target_or_id_is_refused(store: PostgresMemoryStore, ada: str) -> None:
    with pytest.raises(VectorRefused, match="unknown vector target 'chunks'"):
        await store.set_vectors(ada, "chunks", [])  # type: ignore[arg-type]
    with pytest.raises(VectorRefused, match="'nope' is not a memory or knowledge row id"):
        await store.set_vectors(ada, "memory", [("nope", vec(1, 0, 0))])


async def test_missing_vectors_lists_searchable_rows_only(
    store: PostgresMemoryStore, ada: str
) -> None:
    promoted = await store.add_session_chunks(ada, "s0", Tier.MID_TERM, event_chunks(["old"]))
    summary = await store.promote_session(ada, "s0", summary_chunks(["old session summary"]))
    mid = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:2]))
    note = await store.put_knowledge(ada, "a note")

    missing = await store.missing_vectors(ada, limit=10)

    assert {(m.target, m.id, m.text) for m in missing} == {
        ("memory", summary[0].id, "old session summary"),
        ("memory", mid[0].id, TEXTS[0]),
        ("memory", mid[1].id, TEXTS[1]),
        ("knowledge", note.id, "a note"),
    }
    assert promoted[0].id not in {m.id for m in missing}
    assert len(await store.missing_vectors(ada, limit=2)) == 2


async def test_a_vector_of_a_text_since_replaced_is_skipped(
    store: PostgresMemoryStore, ada: str
) -> None:
    item = await store.put_knowledge(ada, "prefers dark mode", name="user.theme")
    # the embedder is given the first text; the item changes before its vector comes back
    await store.put_knowledge(ada, "prefers light mode", name="user.theme")

    stale = await store.set_vectors(
        ada, "knowledge", [(item.id, vec(1, 0, 0), "prefers dark mode")]
    )
    fresh = await store.set_vectors(
        ada, "knowledge", [(item.id, vec(0, 1, 0), "prefers light mode")]
    )

    assert (stale, fresh) == (0, 1)
    assert (await store.get_knowledge(ada, item.id)).has_vector


async def test_the_text_check_holds_for_chunks_with_any_character(
    store: PostgresMemoryStore, ada: str
) -> None:
    text = "tool output with a nul \x00 byte"
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks([text]))
    assert await store.set_vectors(ada, "memory", [(refs[0].id, vec(1, 0, 0), text)]) == 1
