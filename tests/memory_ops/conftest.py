"""The operator's view of memory on a real choird: fixtures and the memory a test starts with.

choird runs in the test process (`serving`: the production composition root) on the test's
Postgres with the local embedder. `filled` writes agent-1's memory through choird's own APIs
(`tests.harness.memory.fill_memory`: events over HEARTBEAT, chunks with `add_session_chunks`,
vectors from the memory service's queue) — the path a session close takes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import UUID

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.embedding.service import MemoryService
from choir.daemon.memory.store import PostgresMemoryStore
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script
from tests.harness.cluster import serving
from tests.harness.memory import fill_memory, memory_store


@pytest.fixture
def script() -> Script:
    return Script(description="no model calls", steps=[ReplyStep(repeat=True, text="ok")])


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
        return memory_store(self.daemon)

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
    session_id, chunk_ids = await fill_memory(daemon)
    return Filled(daemon, client, home, session_id, chunk_ids)
