"""BM25 and relevance figures of `bench.memory`: knowledge search over 100k named items.

An embedded Postgres holds one agent's schema whose knowledge is `bench.memory_corpus` texts,
each named `note-<n>`, of the four kinds in turn, loaded in bulk (one INSERT … SELECT per batch;
the generated term columns, the GIN index and the BM25 change log are filled as a write fills
them), each with a 3-dim vector (HNSW-indexed; `vector_top10_p99_ms` measures the index at 256
dims) and a third of them with an access count and a last access up to 90 days back. Queries
are the corpus' query texts, searched the way choird does (pool, the agent's role), limit 10,
after a first search that builds choird's in-memory BM25 index (timed apart).

- bm25_top10_p99_ms: `text` search of the knowledge store (BM25 over name and text), p99 wall
  clock per query (the index caught up from the change log, then the hits' rows read).
- relevance_top10_p99_ms: `relevance` search with a query vector (50 BM25 + 50 vector
  candidates, the formula, the returned items' access counted), p99 wall clock per query.
- bm25_top10_cpu_ms, relevance_top10_cpu_ms: their mean CPU time per query, this process and
  its Postgres backend (what a loaded machine does not inflate).
- bm25_index_build_s: the first search of the agent, which reads every item's terms.
- context_injection_ms_p50 (and _p99, _items): a message's recalled memories, from the message
  to the prompt's block; see `bench.memory_inject`.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import zlib
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from bench import memory_inject
from bench.memory_corpus import query_texts, session_texts
from bench.memory_search import _Clock, _timed
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, open_pool

AGENT: Final = "bench"
BATCH: Final = 5_000
_LOAD: Final = """
INSERT INTO knowledge_documents (name, text, kind)
SELECT 'note-' || (n + $2), t, (ARRAY['correction', 'preference', 'fact', 'task'])[1 + n % 4]
FROM unnest($1::text[]) WITH ORDINALITY AS u (t, n)
"""
_VECTORS: Final = """
INSERT INTO knowledge_embeddings (document_id, embedding)
SELECT id, ARRAY[random() - 0.5, random() - 0.5, random() - 0.5]::vector FROM knowledge_documents
"""
_ACCESSED: Final = """
INSERT INTO knowledge_access (document_id, access_count, last_accessed)
SELECT id, (random() * 20)::int, now() - random() * interval '90 days'
FROM knowledge_documents WHERE random() < 0.33
"""


async def bm25_figures(count: int, queries: int) -> dict[str, float]:
    texts, asked = session_texts(count), query_texts(queries)
    root = Path(tempfile.mkdtemp(prefix="choir-bench-bm25-"))
    try:
        server = EmbeddedPostgres(root / "pgdata")
        server.start()
        server.stop()  # the first start only creates the cluster: start again with choir.conf
        async with server, open_pool(server.params, min_size=1, max_size=1) as pool:
            await _load(pool, texts)
        async with server, open_pool(server.params, min_size=1, max_size=1) as pool:
            store = PostgresMemoryStore(pool)
            async with pool.acquire() as conn:  # the pool's one connection: every search's
                clock = _Clock(await conn.fetchval("SELECT pg_backend_pid()"))
            started = time.perf_counter()
            await store.search(AGENT, _query("text", asked[0]))
            build_s = time.perf_counter() - started
            bm25_p99, bm25_cpu = await _timed(
                clock, lambda n: _search(store, asked, "text", n), len(asked)
            )
            relevance_p99, relevance_cpu = await _timed(
                clock, lambda n: _search(store, asked, "relevance", n), len(asked)
            )
            injection = await memory_inject.injection_figures(
                store, AGENT, asked, _vector, clock.cpu_s
            )
            return injection | {
                "bm25_top10_p99_ms": bm25_p99,
                "relevance_top10_p99_ms": relevance_p99,
                "bm25_top10_cpu_ms": bm25_cpu,
                "relevance_top10_cpu_ms": relevance_cpu,
                "bm25_index_build_s": build_s,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _load(pool: Pool, texts: list[str]) -> None:
    async with pool.acquire() as conn:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, 3)
        for start in range(0, len(texts), BATCH):
            async with run_as_agent(conn, AGENT) as agent:
                await agent.execute(_LOAD, texts[start : start + BATCH], start)
        async with run_as_agent(conn, AGENT) as agent:
            await agent.execute(_VECTORS)
            await agent.execute(_ACCESSED)
        for table in ("knowledge_documents", "knowledge_embeddings", "knowledge_access"):
            await conn.execute(f"VACUUM ANALYZE choir_bench.{table}")


def _query(mode: str, text: str) -> MemoryQuery:
    vector = _vector(text) if mode == "relevance" else None
    return MemoryQuery(store="knowledge", mode=mode, text=text, vector=vector, limit=10)


def _vector(text: str) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return rng.uniform(-0.5, 0.5, 3).astype(np.float32)


async def _search(store: PostgresMemoryStore, asked: list[str], mode: str, n: int) -> None:
    await store.search(AGENT, _query(mode, asked[n % len(asked)]))


def run(count: int, queries: int) -> dict[str, float]:
    return asyncio.run(bm25_figures(count, queries))
