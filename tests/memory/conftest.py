from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.memory.embeddings_server import EmbeddingsServer


@pytest.fixture
async def server() -> AsyncIterator[EmbeddingsServer]:
    async with EmbeddingsServer() as running:
        yield running
