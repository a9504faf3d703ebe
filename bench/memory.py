"""Memory pipeline figures: `python -m bench.memory [--json] [--quick]`.

- embed_local_texts_per_s: texts the embedded local model (wordllama, `LocalEmbeddings.embed`)
  turns into 256-dim vectors per CPU-second, on short realistic memory chunks (a tool call and
  its result, a chat line, a knowledge note; 6-40 words), in calls of 1,000 texts. CPU time of
  the whole process (its threads included), so the figure is one core's and holds on a loaded
  machine.
- embed_queue_local_texts_per_s: the same texts through `EmbeddingQueue` (batches of 32, one
  worker-thread hop per batch, results delivered per batch), per CPU-second.

- vector_top10_p99_ms, vector_recall_at_10, text_common_term_p99_ms, hybrid_top10_p99_ms: search
  through the memory store over 100k session chunks (5k with --quick) on an embedded Postgres;
  see `bench.memory_search`.
- bm25_top10_p99_ms, relevance_top10_p99_ms, bm25_index_build_s: BM25 `text` and `relevance`
  search of 100k knowledge items (5k with --quick), limit 10; see `bench.memory_bm25`.
- context_injection_ms_p50 (and _p99): from a user message to its recalled memories ready for
  the prompt (design 004), over the same 100k items; see `bench.memory_inject`.

- session_close_10k_events_s (and _cpu_s, _chunks): a stopped session of 10k events chunked,
  embedded (local model) and stored by choird's close; see `bench.memory_close`.

- memory_query_tool_p50_ms (and _p99_ms): `choir.memory.query` from the agent's socket through
  choird (the query embedded, then searched in Postgres) and back, over 2,000 knowledge items
  (200 with --quick); see `bench.memory_tool`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

from bench import memory_bm25, memory_close, memory_search, memory_tool
from bench.common import figures_dict, median, parse_args, report
from choir.daemon.memory.embedding.local_provider import LocalEmbeddings
from choir.daemon.memory.embedding.queue import EmbeddingQueue, EmbeddingResult

GOALS = {
    "embed_local_texts_per_s": "goal >= 20,000 (one core)",
    "embed_queue_local_texts_per_s": "(batches of 32, no goal)",
    "vector_top10_p99_ms": "goal <= 5",
    "vector_recall_at_10": "goal >= 0.95 (vs exact search)",
    "text_common_term_p99_ms": "goal <= 20",
    "hybrid_top10_p99_ms": "goal <= 25",
    "bm25_top10_p99_ms": "goal <= 20 (knowledge, 100k items)",
    "relevance_top10_p99_ms": "goal <= 30 (knowledge, 100k items, with a query vector)",
    "bm25_top10_cpu_ms": "(mean, client + Postgres backend)",
    "relevance_top10_cpu_ms": "(mean, client + Postgres backend)",
    "bm25_index_build_s": "(choird's first BM25 search of an agent: every item's terms read)",
    "vector_top10_cpu_ms": "(mean, client + Postgres backend)",
    "text_common_term_cpu_ms": "(mean, client + Postgres backend)",
    "hybrid_top10_cpu_ms": "(mean, client + Postgres backend)",
    "session_close_10k_events_s": "goal <= 3 (chunk + embed + store, wall clock)",
    "session_close_10k_events_cpu_s": "(choird's + Postgres' CPU over the same span)",
    "session_close_10k_postgres_cpu_s": "(Postgres' part: storing and HNSW-indexing vectors)",
    "session_close_10k_chunks": "(chunks the session became)",
    "context_injection_ms_p50": "goal <= 20 (message -> recalled memories' block, 100k items)",
    "context_injection_ms_p99": "(no goal)",
    "context_injection_cpu_ms": "(mean, client + Postgres backend)",
    "context_injection_items": "(mean items recalled per message, 2,000-token budget)",
    "memory_query_tool_p50_ms": "goal <= 15 (agent -> choird -> Postgres -> agent)",
    "memory_query_tool_p99_ms": "(no goal)",
}
CALL = 1_000

TEMPLATES = (
    "tool call fs.read path={path} returned {n} lines; the {thing} is defined near line {m}",
    "tool call shell.run `pytest {path} -q` exited {code}: {n} passed, {m} failed in {t} s",
    "user: can you {verb} the {thing} in {path} before the {day} release?",
    "assistant: I {past} the {thing}; the {other} still needs a look, see {path}",
    "note: the user prefers {pref} and wants answers short, in {lang}",
    "skill {skill} phase {phase} finished: {n} files changed, tests green",
    "the {thing} fails when {other} is empty because {path} reads it before the lock is taken",
    "reminder: {day} meeting with {name} about the {thing} budget at {n}:{m:02d}",
)
WORDS = {
    "path": ["src/app/config.py", "choir/daemon/app.py", "README.md", "tests/test_api.py"],
    "thing": ["parser", "login form", "retry loop", "cache", "invoice export", "schema"],
    "other": ["migration", "settings page", "queue", "index", "error message"],
    "verb": ["refactor", "fix", "review", "document", "speed up"],
    "past": ["refactored", "fixed", "reviewed", "documented", "rewrote"],
    "day": ["Monday", "Thursday", "Friday", "next week's"],
    "pref": ["tea over coffee", "dark mode", "metric units", "email over calls"],
    "lang": ["French", "English", "German"],
    "skill": ["deploy", "triage", "release-notes"],
    "phase": ["plan", "apply", "verify"],
    "name": ["Alice", "Bob", "Chen", "Dana"],
}


def realistic_texts(count: int, seed: int = 14) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        fields = {key: rng.choice(choices) for key, choices in WORDS.items()}
        numbers = {"n": rng.randint(1, 500), "m": rng.randint(0, 59), "code": rng.choice((0, 1))}
        texts.append(rng.choice(TEMPLATES).format(**fields, **numbers, t=rng.randint(1, 90)))
    return texts


async def provider_rate(texts: Sequence[str]) -> float:
    embedder = LocalEmbeddings()
    await embedder.load()
    started = time.process_time()
    for start in range(0, len(texts), CALL):
        await embedder.embed(texts[start : start + CALL])
    return len(texts) / (time.process_time() - started)


async def queue_rate(texts: Sequence[str]) -> float:
    embedder = LocalEmbeddings()
    await embedder.load()
    delivered = 0

    async def count(results: Sequence[EmbeddingResult]) -> None:
        nonlocal delivered
        delivered += len(results)

    started = time.process_time()
    async with EmbeddingQueue(embedder, count) as queue:
        for n, text in enumerate(texts):
            queue.enqueue(f"chunk-{n}", text)
        await queue.drain()
    assert delivered == len(texts)
    return len(texts) / (time.process_time() - started)


def main() -> None:
    args = parse_args(__doc__ or "")
    count, repeats = (5_000, 1) if args.quick else (100_000, 3)
    texts = realistic_texts(count)
    provider = [asyncio.run(provider_rate(texts)) for _ in range(repeats)]
    queued = [asyncio.run(queue_rate(texts)) for _ in range(repeats)]
    figures = figures_dict(
        embed_local_texts_per_s=median(provider), embed_queue_local_texts_per_s=median(queued)
    )
    figures |= asyncio.run(memory_close.close_figures(10_000))
    figures |= memory_search.run(*((5_000, 100) if args.quick else (100_000, 500)))
    figures |= memory_bm25.run(*((5_000, 100) if args.quick else (100_000, 100)))
    notes = realistic_texts(200 if args.quick else 2_000, seed=7)
    figures |= asyncio.run(memory_tool.query_figures(notes, 50 if args.quick else 300))
    report("memory: embedding pipeline and search (choir.daemon.memory)", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
