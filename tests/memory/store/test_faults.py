"""A connection killed in the middle of a write: nothing half-written, and the rerun completes;
and a delete racing a vector write.

Each write is held at a chosen point by a lock an admin connection takes (a conflicting
uncommitted chunk, a locked row), its backend is killed there with `pg_terminate_backend`,
then the lock is let go and the same call is made again.
"""

from __future__ import annotations

import asyncio

import pytest

from choir.core.memory.chunks import Tier
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import UnavailableError
from choir.store.postgres.pool import Connection, Pool
from tests.memory.store.support import event_chunks, summary_chunks, vec

TEXTS = [f"step {n} of the release" for n in range(10)]
WAIT_S = 10.0


async def wait_for_a_lock_waiter(admin: Connection) -> int:
    """The pid of a backend waiting on a lock in this database (bounded wait for one)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            # inside a transaction pg_stat_activity is read once; each poll needs a fresh look
            await admin.execute("SELECT pg_stat_clear_snapshot()")
            pid: int | None = await admin.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if pid is not None:
                return pid
            await asyncio.sleep(0.02)


async def kill_the_waiting_backend(admin: Connection) -> None:
    """Kill the backend waiting on a lock in this database."""
    pid = await wait_for_a_lock_waiter(admin)
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)


async def memory_rows(admin: Connection, agent_id: str) -> list[tuple[str, int, bool]]:
    rows = await admin.fetch(
        f"SELECT d.tier, d.chunk_index, e.document_id IS NOT NULL AS has_vector "
        f'FROM "choir_{agent_id}".memory_documents d '
        f'LEFT JOIN "choir_{agent_id}".memory_embeddings e ON e.document_id = d.id '
        "ORDER BY d.tier, d.chunk_index"
    )
    return [(r["tier"], r["chunk_index"], r["has_vector"]) for r in rows]


async def test_killed_while_storing_chunks_then_rerun(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    async with pool.acquire() as admin:
        blocker = admin.transaction()
        await blocker.start()
        # an uncommitted chunk 5 of the same session: the insert waits on it halfway through
        await admin.execute(
            f'INSERT INTO "choir_{ada}".memory_documents (session_id, tier, chunk_index, text) '
            "VALUES ('s1', 'mid_term', 5, 'blocker')"
        )
        write = asyncio.create_task(
            store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
        )
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError, match="memory is unavailable"):
            await write
        await blocker.rollback()
        assert await memory_rows(admin, ada) == []

        refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
        again = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS))
        assert [r.id for r in again] == [r.id for r in refs]
        assert all(r.new for r in refs)
        assert not any(r.new for r in again)
        assert await memory_rows(admin, ada) == [("mid_term", n, False) for n in range(10)]


async def test_killed_while_promoting_then_rerun(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    refs = await store.add_session_chunks(ada, "s1", Tier.MID_TERM, event_chunks(TEXTS[:3]))
    await store.set_vectors(ada, "memory", [(r.id, vec(1, n, 0)) for n, r in enumerate(refs)])
    before = [("mid_term", n, True) for n in range(3)]
    summary = summary_chunks(["released after three steps", "notes sent"])

    async with pool.acquire() as admin:
        blocker = admin.transaction()
        await blocker.start()
        # a locked event chunk: promotion stops after its summaries, before marking detail
        await admin.execute(
            f'SELECT FROM "choir_{ada}".memory_documents WHERE chunk_index = 2 FOR UPDATE'
        )
        promotion = asyncio.create_task(store.promote_session(ada, "s1", summary))
        await kill_the_waiting_backend(admin)
        with pytest.raises(UnavailableError):
            await promotion
        await blocker.rollback()
        assert await memory_rows(admin, ada) == before

        first = await store.promote_session(ada, "s1", summary)
        again = await store.promote_session(ada, "s1", summary)
        assert [r.id for r in again] == [r.id for r in first]
        assert await memory_rows(admin, ada) == [
            ("long_term_detail", 0, False),
            ("long_term_detail", 1, False),
            ("long_term_detail", 2, False),
            ("long_term_summary", 0, False),
            ("long_term_summary", 1, False),
        ]


async def test_a_delete_racing_a_vector_write_is_skipped_not_a_foreign_key_error(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    doomed = await store.put_knowledge(ada, "deleted while its vector is written")
    kept = await store.put_knowledge(ada, "kept")
    async with pool.acquire() as admin:
        deleting = admin.transaction()
        await deleting.start()
        await admin.execute(
            f'DELETE FROM "choir_{ada}".knowledge_documents WHERE id = $1', doomed.id
        )
        write = asyncio.create_task(
            store.set_vectors(
                ada, "knowledge", [(doomed.id, vec(1, 0, 0)), (kept.id, vec(0, 1, 0))]
            )
        )
        await wait_for_a_lock_waiter(admin)
        await deleting.commit()
        assert await write == 1
    assert [item.has_vector for item in await store.list_knowledge(ada, limit=10)] == [True]
