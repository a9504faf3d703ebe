"""BM25 figure of `bench.memory`: knowledge text search over 100k named items.

An embedded Postgres holds one agent's schema whose knowledge is `bench.memory_corpus` texts,
each named `note-<n>`, loaded in bulk (one INSERT … SELECT per batch; the generated term columns
and GIN index are filled as a write fills them). Queries are the corpus' query texts, searched
the way choird does (pool, the agent's role, one statement), limit 10.

- bm25_top10_p99_ms: `text` search of the knowledge store (BM25 over name and text), p99 wall
  clock per query.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Final

from bench.common import percentile
from bench.memory_corpus import query_texts, session_texts
from choir.daemon.memory.search import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, open_pool

AGENT: Final = "bench"
BATCH: Final = 5_000
_LOAD: Final = """
INSERT INTO knowledge_documents (name, text)
SELECT 'note-' || (n + $2), t FROM unnest($1::text[]) WITH ORDINALITY AS u (t, n)
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
            return {"bm25_top10_p99_ms": await _timed(store, asked)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _load(pool: Pool, texts: list[str]) -> None:
    async with pool.acquire() as conn:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, 3)
        for start in range(0, len(texts), BATCH):
            async with run_as_agent(conn, AGENT) as agent:
                await agent.execute(_LOAD, texts[start : start + BATCH], start)
        await conn.execute("VACUUM ANALYZE choir_bench.knowledge_documents")


async def _timed(store: PostgresMemoryStore, asked: list[str]) -> float:
    def query(n: int) -> MemoryQuery:
        return MemoryQuery(store="knowledge", mode="text", text=asked[n % len(asked)], limit=10)

    for n in range(min(len(asked), 20)):  # warm the caches and the prepared statement
        await store.search(AGENT, query(n))
    samples = []
    for n in range(len(asked)):
        started = time.perf_counter()
        await store.search(AGENT, query(n))
        samples.append((time.perf_counter() - started) * 1000)
    return percentile(samples, 99)


def run(count: int, queries: int) -> dict[str, float]:
    return asyncio.run(bm25_figures(count, queries))
