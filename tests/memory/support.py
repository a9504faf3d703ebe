"""Helpers of the memory tests: log capture and providers made for a server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from choir.daemon.memory.embedding.backoff import Backoff
from choir.daemon.memory.embedding.openai_provider import EmbeddingSettings, OpenAIEmbeddings
from tests.harness.log_lines import log_lines

FAST = Backoff(base_s=0.01)
"""§11.9's schedule (doubling, three retries, jitter) at 1/100 of the waits."""
KEY = "sk-test-7f3a9c1e5b"


def provider(url: str, dims: int = 8, **fields: Any) -> OpenAIEmbeddings:
    settings = EmbeddingSettings("test-embed", url, dims, api_key=KEY, **fields)
    return OpenAIEmbeddings(settings, backoff=FAST)


@contextmanager
def memory_log_lines() -> Iterator[list[dict[str, Any]]]:
    """The JSON lines the embedding pipeline logs while the block runs, as choird's log would."""
    with log_lines("choir.memory.embeddings", "choird") as lines:
        yield lines
