"""Memory store fixtures: a pool on the per-test database, two agents with 3-dim embeddings.

The embedded Postgres and the per-test database come from `tests/conftest.py`; agent ids are
unique to each test because roles are cluster-wide.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams

DIMS = 3


@pytest.fixture
def agents() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"ada-{suffix}", f"bob_{suffix}"


@pytest.fixture
async def pool(pg_params: ConnectParams, agents: tuple[str, str]) -> AsyncIterator[Pool]:
    async with open_pool(pg_params, min_size=1, max_size=4) as opened:
        async with opened.acquire() as conn:
            await apply_control_schema(conn)
            for agent_id in agents:
                await ensure_agent_schema(conn, agent_id, DIMS)
        yield opened


@pytest.fixture
def store(pool: Pool) -> PostgresMemoryStore:
    return PostgresMemoryStore(pool)


@pytest.fixture
def ada(agents: tuple[str, str]) -> str:
    return agents[0]
