"""`bench.memory`'s search figures, once, on a small corpus."""

from __future__ import annotations

from bench.memory_bm25 import bm25_figures
from bench.memory_corpus import COMMON_TERM, session_texts
from bench.memory_search import search_figures


def test_the_corpus_is_varied_and_has_a_common_term() -> None:
    texts = session_texts(5_000)
    assert len(set(texts)) > 4_500
    assert sum(COMMON_TERM in text.split() for text in texts) > 1_000
    assert session_texts(100) == session_texts(100)


async def test_the_bench_measures_every_search() -> None:
    figures = await search_figures(1_000, 30)
    assert set(figures) == {
        "vector_top10_p99_ms",
        "vector_recall_at_10",
        "text_common_term_p99_ms",
        "hybrid_top10_p99_ms",
        "vector_top10_cpu_ms",
        "text_common_term_cpu_ms",
        "hybrid_top10_cpu_ms",
    }
    assert figures["vector_recall_at_10"] > 0.9  # a thousand vectors: near exact
    assert all(value > 0 for value in figures.values())


async def test_the_bench_measures_bm25_and_relevance() -> None:
    figures = await bm25_figures(1_000, 30)
    assert set(figures) == {
        "bm25_top10_p99_ms",
        "relevance_top10_p99_ms",
        "bm25_top10_cpu_ms",
        "relevance_top10_cpu_ms",
        "bm25_index_build_s",
        "context_injection_ms_p50",
        "context_injection_ms_p99",
        "context_injection_cpu_ms",
        "context_injection_items",
    }
    assert all(value > 0 for value in figures.values())
