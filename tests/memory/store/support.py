"""Small builders for the memory store tests."""

from __future__ import annotations

import numpy as np

from choir.core.memory.chunks import ChunkKind, MemoryChunk
from choir.daemon.memory.embedding.provider import Vector


def vec(*values: float) -> Vector:
    return np.array(values, dtype=np.float32)


def event_chunks(texts: list[str], *, first_rev: int = 1) -> list[MemoryChunk]:
    """Chunks cut from consecutive events, one event each."""
    return [
        MemoryChunk(n, text, ChunkKind.TOOL_CALL, first_rev + n, first_rev + n)
        for n, text in enumerate(texts)
    ]


def summary_chunks(texts: list[str]) -> list[MemoryChunk]:
    return [MemoryChunk(n, text, ChunkKind.SUMMARY) for n, text in enumerate(texts)]
