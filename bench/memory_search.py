"""Search figures of `bench.memory`: session memory of 100k chunks, searched through the store.

An embedded Postgres (choird's own server settings) holds one agent's schema, filled with
`bench.memory_corpus` texts and their local (wordllama) vectors through `PostgresMemoryStore`;
the HNSW index is dropped while loading and created again from its own definition, as a bulk
build. The server then restarts, as under a choird started on a home holding that memory (its
shared buffers are sized at start for the data), and every query goes the way choird's will:
pool, the agent's role, one statement.

- vector_top10_p99_ms: `semantic` search, limit 10, wall clock per query (p99).
- vector_recall_at_10: the share of the exact 10 nearest (cosine, numpy over all vectors) that
  the HNSW search returns; a returned chunk as near as the exact 10th counts (duplicate texts).
- text_common_term_p99_ms: `text` search for a term in about half the chunks (p99).
- hybrid_top10_p99_ms: `hybrid` search (text + vector, reciprocal-rank fusion), limit 10 (p99).
- *_cpu_ms: the mean CPU time per query of the same searches, this process and its Postgres
  backend together (`/proc/<pid>/stat`): what a query costs whatever the machine's load, where
  the p99 wall clock of a shared 2-core machine mostly measures waiting for a core.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final
from uuid import UUID

import numpy as np

from bench.common import percentile
from bench.memory_corpus import COMMON_TERM, query_texts, session_texts
from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.daemon.memory.embedding.local_provider import DIMENSIONS, LocalEmbeddings
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, open_pool

AGENT: Final = "bench"
SESSION_CHUNKS: Final = 200
"""Chunks per stored session (a long session's worth)."""
VECTOR_BATCH: Final = 2_000
INDEX: Final = "memory_embeddings_hnsw_idx"


async def search_figures(count: int, queries: int) -> dict[str, float]:
    """Build the corpus of `count` chunks, then time `queries` searches of each kind."""
    texts, asked = session_texts(count), query_texts(queries)
    embedder = LocalEmbeddings()
    vectors = np.stack(await embedder.embed(texts))
    query_vectors = await embedder.embed(asked)
    root = Path(tempfile.mkdtemp(prefix="choir-bench-memory-"))
    try:
        server = EmbeddedPostgres(root / "pgdata")
        server.start()
        server.stop()  # the first start only creates the cluster: start again with choir.conf
        async with server, open_pool(server.params, min_size=1, max_size=1) as pool:
            ids = await _load(pool, texts, vectors)
        # served as choird serves a home holding this memory: from a start on it, whose
        # server settings are sized for the data (`settings.shared_buffers_for`)
        async with server, open_pool(server.params, min_size=1, max_size=1) as pool:
            async with pool.acquire() as conn:  # the pool's one connection: every query's
                backend = await conn.fetchval("SELECT pg_backend_pid()")
            store = PostgresMemoryStore(pool)
            return await _measure(store, _Clock(backend), ids, vectors, asked, query_vectors)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _load(pool: Pool, texts: Sequence[str], vectors: np.ndarray) -> list[UUID]:
    async with pool.acquire() as conn:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, DIMENSIONS)
        definition = await conn.fetchval("SELECT pg_get_indexdef(to_regclass($1))", _index())
        await conn.execute(f"DROP INDEX {_index()}")
    store = PostgresMemoryStore(pool)
    ids: list[UUID] = []
    for start in range(0, len(texts), SESSION_CHUNKS):
        chunks = [
            MemoryChunk(n, text, ChunkKind.TOOL_CALL, start + n, start + n)
            for n, text in enumerate(texts[start : start + SESSION_CHUNKS])
        ]
        refs = await store.add_session_chunks(AGENT, f"s{start:07d}", Tier.MID_TERM, chunks)
        ids += [ref.id for ref in refs]
    for start in range(0, len(ids), VECTOR_BATCH):
        batch = list(zip(ids[start : start + VECTOR_BATCH], vectors[start:], strict=False))
        await store.set_vectors(AGENT, "memory", batch)
    async with pool.acquire() as conn:
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute(definition)
        await conn.execute(f'VACUUM ANALYZE "choir_{AGENT}".memory_documents')
        await conn.execute(f'VACUUM ANALYZE "choir_{AGENT}".memory_embeddings')
    return ids


def _index() -> str:
    return f'"choir_{AGENT}".{INDEX}'


class _Clock:
    """CPU seconds used so far by this process and one Postgres backend."""

    def __init__(self, backend_pid: int) -> None:
        self._stat = Path(f"/proc/{backend_pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def cpu_s(self) -> float:
        fields = self._stat.read_text().rsplit(")", 1)[1].split()
        backend_ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return time.process_time() + backend_ticks / self._tick


async def _measure(
    store: PostgresMemoryStore,
    clock: _Clock,
    ids: list[UUID],
    vectors: np.ndarray,
    asked: Sequence[str],
    query_vectors: Sequence[Vector],
) -> dict[str, float]:
    row_of = {chunk_id: n for n, chunk_id in enumerate(ids)}
    found: dict[int, list[int]] = {}

    async def semantic(n: int) -> None:
        hits = await store.search(AGENT, MemoryQuery(mode="semantic", vector=query_vectors[n]))
        found[n] = [row_of[hit.source.id] for hit in hits]

    async def common_term(n: int) -> None:
        await store.search(AGENT, MemoryQuery(mode="text", text=COMMON_TERM))

    async def hybrid(n: int) -> None:
        query = MemoryQuery(mode="hybrid", text=asked[n], vector=query_vectors[n])
        await store.search(AGENT, query)

    vector_p99, vector_cpu = await _timed(clock, semantic, len(asked))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    recalls = [_recall(unit, query_vectors[n], np.array(rows)) for n, rows in found.items()]
    text_p99, text_cpu = await _timed(clock, common_term, len(asked))
    hybrid_p99, hybrid_cpu = await _timed(clock, hybrid, len(asked))
    return {
        "vector_top10_p99_ms": vector_p99,
        "vector_recall_at_10": float(np.mean(recalls)),
        "text_common_term_p99_ms": text_p99,
        "hybrid_top10_p99_ms": hybrid_p99,
        "vector_top10_cpu_ms": vector_cpu,
        "text_common_term_cpu_ms": text_cpu,
        "hybrid_top10_cpu_ms": hybrid_cpu,
    }


def _recall(unit: np.ndarray, query: Vector, found: np.ndarray, k: int = 10) -> float:
    distances = 1 - unit @ (query / np.linalg.norm(query))
    kth = np.partition(distances, k - 1)[k - 1]
    return min(k, int((distances[found] <= kth + 1e-6).sum())) / k


async def _timed(
    clock: _Clock, search: Callable[[int], Awaitable[None]], count: int
) -> tuple[float, float]:
    """The p99 wall-clock milliseconds of `count` searches, and their mean CPU milliseconds."""
    for n in range(min(count, 20)):  # warm the caches and the prepared statements
        await search(n)
    samples = []
    cpu_started = clock.cpu_s()
    for n in range(count):
        started = time.perf_counter()
        await search(n)
        samples.append((time.perf_counter() - started) * 1000)
    cpu_ms = (clock.cpu_s() - cpu_started) * 1000 / count
    return percentile(samples, 99), cpu_ms


def run(count: int, queries: int) -> dict[str, float]:
    return asyncio.run(search_figures(count, queries))
