"""`MemoryIndex` on a real choird's memory store (test Postgres, local embedder): a row queued
by id gets its vector in its agent's schema, and a backfill embeds what was stored without one,
page by page, saying how far it got."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.config.resources import EmbeddingConfig
from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.embedding.index import MemoryIndex, chunk_id, parse_chunk_id
from choir.daemon.memory.embedding.service import EmbeddingSource, MemoryService
from choir.daemon.memory.search.query import MemoryQuery
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.harness.log_lines import log_lines

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def daemon(root: Path, pg_params: ConnectParams) -> AsyncIterator[ChoirDaemon]:
    home = make_home(root, postgres=external_postgres(pg_params))
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        assert daemon.memory_index is not None
        await daemon.memory_index.backfilled()  # the start's, over an empty memory
        yield daemon


def test_a_chunk_id_names_its_agent_target_and_row() -> None:
    from uuid import uuid4

    row = uuid4()
    assert parse_chunk_id(chunk_id("agent-1", "knowledge", row)) == ("agent-1", "knowledge", row)
    assert parse_chunk_id("chunk-7") is None
    assert parse_chunk_id(f"other/agent-1/{row}") is None
    assert parse_chunk_id("memory/agent-1/not-a-uuid") is None


async def test_an_indexed_knowledge_item_gets_its_vector(daemon: ChoirDaemon) -> None:
    store, index = daemon.memory_store, daemon.memory_index
    assert store is not None
    assert index is not None
    assert daemon.memory is not None
    item = await store.put_knowledge("agent-1", "the user prefers dark mode", name="theme")
    other = await store.put_knowledge("agent-2", "agent-2 deploys on fridays")
    index.index("agent-1", "knowledge", item.id, item.text)
    index.index("agent-2", "knowledge", other.id, other.text)
    await index.settled()

    assert (await store.stats("agent-1")).vectors_missing == 0
    assert (await store.stats("agent-2")).vectors_missing == 0
    vector = await daemon.memory.embed_query("dark mode", timeout_s=30)
    query = MemoryQuery(store="knowledge", mode="semantic", vector=vector)
    [hit] = await store.search("agent-1", query)
    assert hit.source.id == item.id


async def test_a_backfill_embeds_rows_stored_without_vectors(daemon: ChoirDaemon) -> None:
    store = daemon.memory_store
    assert store is not None
    for n in range(3):
        await store.put_knowledge("agent-1", f"note {n} about the invoice export")
    chunks = [
        MemoryChunk(i, f"chunk {i} of an old session", ChunkKind.MESSAGES, i, i) for i in range(4)
    ]
    await store.add_session_chunks("agent-1", "s-old", Tier.MID_TERM, chunks)
    assert (await store.stats("agent-1")).vectors_missing == 7

    async with MemoryService(lambda: EmbeddingSource(EmbeddingConfig())) as service:
        index = MemoryIndex(store, service, page=3)
        with log_lines("choir.memory", "choird") as lines:
            assert await index.backfill("agent-1") == 7
        await index.aclose()
    assert (await store.stats("agent-1")).vectors_missing == 0
    said = [line["message"] for line in lines if line["message"].startswith("memory:")]
    assert said[0] == "memory: backfilling 7 vectors for agent-1"
    assert said[1:] == [
        "memory: 3/7 vectors for agent-1",
        "memory: 6/7 vectors for agent-1",
        "memory: 7/7 vectors for agent-1",
    ]


async def test_few_vectors_are_stored_one_write_at_a_time(
    daemon: ChoirDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few rows' vectors (a compaction's archive) go to both writers, but the two writes take
    turns: side by side each would hold a pooled connection (a Postgres backend of its own)."""
    store = daemon.memory_store
    assert store is not None
    for n in range(16):  # both writers get some: all 16 in one lane is a 1 in 32k chance
        await store.put_knowledge("agent-1", f"note {n} about the invoice export")
    writing, most = 0, 0
    set_vectors = store.set_vectors

    async def counted(*args: Any, **kwargs: Any) -> int:
        nonlocal writing, most
        writing += 1
        most = max(most, writing)
        try:
            return await set_vectors(*args, **kwargs)
        finally:
            writing -= 1

    monkeypatch.setattr(store, "set_vectors", counted)
    async with MemoryService(lambda: EmbeddingSource(EmbeddingConfig())) as service:
        index = MemoryIndex(store, service, page=16)
        assert await index.backfill("agent-1") == 16
        await index.aclose()
    assert most == 1
    assert (await store.stats("agent-1")).vectors_missing == 0
