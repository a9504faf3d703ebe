"""An agent's memory written through choird's own APIs, as a session close writes it.

`fill_memory` commits a session's events over HEARTBEAT (the agent verbs), stores its chunks
with `MemoryStore.add_session_chunks`, has the memory service's queue embed them (the real
local model) and stores the vectors with `set_vectors`.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.store import PostgresMemoryStore
from choir.daemon.operator.api import memory_store_of
from choir.protocol import Verb
from choir.store.memory.vectors import VectorTarget
from tests.daemon.agent import AgentClient, Chain
from tests.harness.waits import poll_until

TEXTS = (
    "deployed the release to the staging cluster with kubectl rollout",
    "the user prefers answers in metric units and British spelling",
    "fixed the flaky login test by waiting for the session cookie",
)
"""The three mid-term chunks `fill_memory` stores (cut from events 1-2, 3-4, 5-6)."""


async def fill_memory(daemon: ChoirDaemon, agent: str = "agent-1") -> tuple[str, list[UUID]]:
    """A stopped session of `agent` with six events and `TEXTS` as its embedded mid-term
    chunks; its id and the chunks' ids, in order."""
    session_id = await committed_session(daemon, events=6, agent=agent)
    store = memory_store(daemon)
    chunks = [
        MemoryChunk(i, text, ChunkKind.TOOL_CALL, first_rev=2 * i + 1, last_rev=2 * i + 2)
        for i, text in enumerate(TEXTS)
    ]
    refs = await store.add_session_chunks(agent, session_id, Tier.MID_TERM, chunks)
    await embed(daemon, agent, "memory", [(ref.id, ref.text) for ref in refs])
    assert daemon.services is not None
    await daemon.services.sessions.stop(session_id, "test")
    await settled_close(daemon, session_id)
    return session_id, [ref.id for ref in refs]


async def settled_close(daemon: ChoirDaemon, session_id: str) -> None:
    """Wait until choird's close of the stopped `session_id` is done and its vectors stored, so
    a test compares memory that no longer changes underneath it."""
    await daemon.memory_started()
    assert daemon.database is not None
    assert daemon.memory_index is not None
    pool = daemon.database.pool

    async def closed() -> bool:
        async with pool.acquire() as conn:
            state = await conn.fetchval(
                "SELECT state FROM choir_control.memory_closes WHERE session_id = $1", session_id
            )
        return bool(state == "closed")

    await poll_until(closed, within=60, every=0.05)
    async with asyncio.timeout(60):
        await daemon.memory_index.settled()


def memory_store(daemon: ChoirDaemon) -> PostgresMemoryStore:
    """choird's memory store (the one its operator verbs use)."""
    store = memory_store_of(daemon)
    assert isinstance(store, PostgresMemoryStore)
    return store


async def committed_session(daemon: ChoirDaemon, *, events: int, agent: str = "agent-1") -> str:
    """A session of `agent` with `events` user messages committed over HEARTBEAT."""
    services = daemon.services
    assert services is not None
    client = AgentClient(services, await services.sessions.start(agent, {}))
    chain = Chain()
    chain.commit(events, text="memory event")
    await client.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    return client.session_id


async def embed(
    daemon: ChoirDaemon, agent: str, target: VectorTarget, rows: list[tuple[UUID, str]]
) -> None:
    """Vectors for `rows` from the memory service's queue, stored."""
    memory, store = daemon.memory, memory_store(daemon)
    assert memory is not None
    futures = [await memory.enqueue(str(row_id), text) for row_id, text in rows]
    async with asyncio.timeout(60):
        vectors = await asyncio.gather(*futures)
    stored: list[tuple[UUID | str, Vector]] = []
    for (row_id, _), vector in zip(rows, vectors, strict=True):
        assert vector is not None, "the local model gave no vector"
        stored.append((row_id, vector))
    await store.set_vectors(agent, target, stored)
