from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from choir.adapters.llm.client import LlmClient


@pytest.fixture
async def llm() -> AsyncIterator[LlmClient]:
    async with LlmClient() as client:
        yield client
