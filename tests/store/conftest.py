"""Store fixtures: an admin connection to the per-test database, and unique agent ids.

The embedded Postgres and the per-test database come from `tests/conftest.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from choir.store.postgres.pool import (
    Connection,
    connect,
)
from choir.store.postgres.target import ConnectParams


@pytest.fixture
async def conn(pg_params: ConnectParams) -> AsyncIterator[Connection]:
    """An admin connection to the test database, with choir's codecs."""
    connection = await connect(pg_params)
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
def agent_ids() -> tuple[str, str]:
    """Two agent ids unique to this test (one with a hyphen, which needs quoting)."""
    suffix = uuid.uuid4().hex[:8]
    return f"alpha-{suffix}", f"beta_{suffix}"
