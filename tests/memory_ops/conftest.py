"""The operator's view of memory on a real choird: fixtures and the memory a test starts with.

choird runs in the test process (`serving`: the production composition root) on the test's
Postgres with the local embedder. `filled` writes agent-1's memory through choird's own APIs:
a session whose events are committed over the agent verbs (HEARTBEAT), its chunks stored with
`MemoryStore.add_session_chunks`, their vectors made by the memory service's queue and stored
with `set_vectors` — the path a session close takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import UUID

import pytest

from choir.client import ChoirClient
from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.provider import Vector
from choir.daemon.memory.service import MemoryService
from choir.daemon.memory.store import PostgresMemoryStore
from choir.home import ChoirHome
from choir.protocol import Verb
from choir.scripted import ReplyStep, Script
from choir.store.memory_vectors import VectorTarget
from tests.daemon.agent import AgentClient, Chain
from tests.harness.cluster import serving


@pytest.fixture
def script() -> Script:
    return Script(description="no model calls", steps=[ReplyStep(repeat=True, text="ok")])


TEXTS = (
    "deployed the release to the staging cluster with kubectl rollout",
    "the user prefers answers in metric units and British spelling",
    "fixed the flaky login test by waiting for the session cookie",
)
"""agent-1's three mid-term chunks of session one (events 1-2, 3-4, 5-6)."""


@dataclass
class Filled:
    daemon: ChoirDaemon
    client: ChoirClient
    home: ChoirHome
    session_id: str
    chunk_ids: list[UUID]
    """The chunks of `TEXTS`, in order."""

    @property
    def store(self) -> PostgresMemoryStore:
        assert self.daemon.memory_store is not None
        return self.daemon.memory_store

    @property
    def memory(self) -> MemoryService:
        assert self.daemon.memory is not None
        return self.daemon.memory


@pytest.fixture
async def live(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with serving(home) as (daemon, client):
        yield daemon, client


@pytest.fixture
async def filled(live: tuple[ChoirDaemon, ChoirClient], home: ChoirHome) -> Filled:
    daemon, client = live
    session_id = await committed_session(daemon, events=6)
    store = daemon.memory_store
    assert store is not None
    chunks = [
        MemoryChunk(i, text, ChunkKind.TOOL_CALL, first_rev=2 * i + 1, last_rev=2 * i + 2)
        for i, text in enumerate(TEXTS)
    ]
    refs = await store.add_session_chunks("agent-1", session_id, Tier.MID_TERM, chunks)
    await embed(daemon, "memory", [(ref.id, ref.text) for ref in refs])
    await daemon.services.sessions.stop(session_id, "test")  # type: ignore[union-attr]
    return Filled(daemon, client, home, session_id, [ref.id for ref in refs])


async def committed_session(daemon: ChoirDaemon, *, events: int, agent: str = "agent-1") -> str:
    """A session of `agent` with `events` user messages committed over HEARTBEAT."""
    services = daemon.services
    assert services is not None
    client = AgentClient(services, await services.sessions.start(agent, {}))
    chain = Chain()
    chain.commit(events, text="memory event")
    await client.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    return client.session_id


async def embed(daemon: ChoirDaemon, target: VectorTarget, rows: list[tuple[UUID, str]]) -> None:
    """Vectors for `rows` from the memory service's queue (the real local model), stored."""
    memory, store = daemon.memory, daemon.memory_store
    assert memory is not None
    assert store is not None
    futures = [await memory.enqueue(str(row_id), text) for row_id, text in rows]
    async with asyncio.timeout(60):
        vectors = await asyncio.gather(*futures)
    stored: list[tuple[UUID | str, Vector]] = []
    for (row_id, _), vector in zip(rows, vectors, strict=True):
        assert vector is not None, "the local model gave no vector"
        stored.append((row_id, vector))
    await store.set_vectors("agent-1", target, stored)
