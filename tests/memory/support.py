"""Helpers of the memory tests: log capture and providers made for a server."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from choir.daemon.memory.backoff import Backoff
from choir.daemon.memory.openai_provider import EmbeddingSettings, OpenAIEmbeddings
from choir.logs import JsonLinesFormatter

FAST = Backoff(base_s=0.01)
"""§11.9's schedule (doubling, three retries, jitter) at 1/100 of the waits."""
KEY = "sk-test-7f3a9c1e5b"


def provider(url: str, dims: int = 8, **fields: Any) -> OpenAIEmbeddings:
    settings = EmbeddingSettings("test-embed", url, dims, api_key=KEY, **fields)
    return OpenAIEmbeddings(settings, backoff=FAST)


@contextmanager
def memory_log_lines() -> Iterator[list[dict[str, Any]]]:
    """The JSON lines the embedding pipeline logs while the block runs, as choird's log would."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonLinesFormatter("choird"))
    logger = logging.getLogger("choir.memory.embeddings")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        lines.extend(json.loads(line) for line in buffer.getvalue().splitlines())
