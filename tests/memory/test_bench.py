"""`bench.memory`'s code path once, on a few texts."""

from __future__ import annotations

from bench.memory import provider_rate, queue_rate, realistic_texts


async def test_the_bench_measures_both_paths() -> None:
    texts = realistic_texts(2_000)
    assert len(set(texts)) > 1_500  # varied, as memory chunks are
    assert all(6 <= len(text.split()) <= 40 for text in texts)
    assert await provider_rate(texts) > 0
    assert await queue_rate(texts) > 0
