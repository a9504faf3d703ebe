from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from choir.adapters.llm import LlmClient


@pytest.fixture
async def llm() -> AsyncIterator[LlmClient]:
    async with LlmClient(timeout_s=10.0) as client:
        yield client
