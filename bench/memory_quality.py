"""Retrieval quality of knowledge search: `python -m bench.memory_quality [--json] [--quick]`.

The labelled set (`bench.memory_quality_set`: superseded facts and their corrections, changed
preferences, paraphrased questions, tool-call-only evidence) is stored in one agent's knowledge
on an embedded Postgres among 2,000 noise items (500 with --quick) of all ages, each with its
kind, age and use history, every item embedded by the local model (wordllama). Each question is
searched three ways through choird's store, limit 10: `text` (BM25), `semantic` (the query's
vector) and `relevance` (design 004's formula over both, config's default weights). A relevance
search counts its hits as used; the use history is restored after each question so that every
question sees the same memory.

- ndcg_at_10_{text,vector,relevance}: mean nDCG@10 (gain 2^g - 1: the current answer 2,
  supporting items 1, a superseded fact 0).
- recall_at_10_{text,vector,relevance}: mean share of the items with gain > 0 in the top 10.
- relevance_margin: relevance's nDCG@10 minus the better of the other two (goal >= 0.05).
"""

from __future__ import annotations

import asyncio
import math
import random
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from bench.common import figures_dict, parse_args, report
from bench.memory_corpus import session_texts
from bench.memory_quality_set import TOPICS, Item, Query
from choir.daemon.memory.embedding.local_provider import LocalEmbeddings
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import ensure_agent_schema
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, open_pool

AGENT: Final = "quality"
SCHEMA: Final = '"choir_quality"'
DIMS: Final = 256
K: Final = 10
MODES: Final = {"text": "text", "vector": "semantic", "relevance": "relevance"}
GOALS = {
    "ndcg_at_10_relevance": "goal: >= both others + 0.05",
    "relevance_margin": "goal >= 0.05",
}
_AGED: Final = f"""
UPDATE {SCHEMA}.knowledge_documents SET updated_at = now() - make_interval(secs => $2 * 86400)
WHERE name = $1
"""
_USED: Final = f"""
INSERT INTO {SCHEMA}.knowledge_access (document_id, access_count, last_accessed)
SELECT id, $2, now() - make_interval(secs => $3 * 86400)
FROM {SCHEMA}.knowledge_documents WHERE name = $1
"""
_SNAPSHOT: Final = f"CREATE TABLE public.quality_access AS SELECT * FROM {SCHEMA}.knowledge_access"
_RESTORE: Final = (
    f"DELETE FROM {SCHEMA}.knowledge_access; "
    f"INSERT INTO {SCHEMA}.knowledge_access SELECT * FROM public.quality_access"
)


def noise(count: int, seed: int = 5) -> list[Item]:
    """Other sessions' knowledge: realistic chunks, facts and tasks of every age, a few used."""
    rng = random.Random(seed)
    items = []
    for n, text in enumerate(session_texts(count, seed=seed)):
        used = rng.random() < 0.2
        items.append(
            Item(
                f"noise-{n}",
                text,
                rng.choice(("fact", "fact", "task", "preference")),
                rng.uniform(0, 180),
                rng.randint(1, 30) if used else 0,
                rng.uniform(0, 30) if used else None,
            )
        )
    return items


def ndcg(ranked: Sequence[str], gains: dict[str, int], k: int = K) -> float:
    dcg = sum((2 ** gains.get(n, 0) - 1) / math.log2(i + 2) for i, n in enumerate(ranked[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best > 0 else 0.0


def recall(ranked: Sequence[str], gains: dict[str, int], k: int = K) -> float:
    wanted = {n for n, g in gains.items() if g > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


async def quality_figures(noise_count: int) -> dict[str, float]:
    items = [item for topic in TOPICS for item in topic.items] + noise(noise_count)
    queries = [query for topic in TOPICS for query in topic.queries]
    embedder = LocalEmbeddings()
    await embedder.load()
    root = Path(tempfile.mkdtemp(prefix="choir-bench-quality-"))
    try:
        server = EmbeddedPostgres(root / "pgdata")
        server.start()
        server.stop()  # the first start only creates the cluster: start again with choir.conf
        async with server, open_pool(server.params, min_size=1, max_size=2) as pool:
            store = PostgresMemoryStore(pool)
            await _fill(pool, store, embedder, items)
            return await _evaluate(pool, store, embedder, queries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _fill(
    pool: Pool, store: PostgresMemoryStore, embedder: LocalEmbeddings, items: list[Item]
) -> None:
    async with pool.acquire() as conn:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, DIMS)
    stored = [await store.add_knowledge(AGENT, i.text, name=i.name, kind=i.kind) for i in items]
    vectors = await embedder.embed([item.text for item in items])
    await store.set_vectors(
        AGENT, "knowledge", [(s.id, v) for s, v in zip(stored, vectors, strict=True)]
    )
    async with pool.acquire() as conn:
        await conn.executemany(_AGED, [(i.name, i.days) for i in items])
        used = [(i.name, i.uses, i.used_days) for i in items if i.used_days is not None]
        await conn.executemany(_USED, used)
        await conn.execute(_SNAPSHOT)


async def _evaluate(
    pool: Pool, store: PostgresMemoryStore, embedder: LocalEmbeddings, queries: list[Query]
) -> dict[str, float]:
    scores: dict[str, list[tuple[float, float]]] = {name: [] for name in MODES}
    for query in queries:
        [vector] = await embedder.embed([query.text])
        for name, mode in MODES.items():
            hits = await store.search(
                AGENT,
                MemoryQuery(store="knowledge", mode=mode, text=query.text, vector=vector, limit=K)
                if mode != "text"
                else MemoryQuery(store="knowledge", mode=mode, text=query.text, limit=K),
            )
            ranked = [hit.source.name or "" for hit in hits]
            scores[name].append((ndcg(ranked, query.gains), recall(ranked, query.gains)))
        async with pool.acquire() as conn:
            await conn.execute(_RESTORE)  # every question sees the same use history
    figures = {}
    for name, pairs in scores.items():
        figures[f"ndcg_at_10_{name}"] = sum(p[0] for p in pairs) / len(pairs)
        figures[f"recall_at_10_{name}"] = sum(p[1] for p in pairs) / len(pairs)
    figures["relevance_margin"] = figures["ndcg_at_10_relevance"] - max(
        figures["ndcg_at_10_text"], figures["ndcg_at_10_vector"]
    )
    figures["queries"] = len(queries)
    return figures_dict(**figures)


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = asyncio.run(quality_figures(500 if args.quick else 2_000))
    report("memory: knowledge retrieval quality (nDCG@10, recall@10)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
