"""The embedding queue (§11.9) over a real provider: batches, ticks, failures that cost only
vectors."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from choir.daemon.memory.embedding.backoff import Backoff
from choir.daemon.memory.embedding.local_provider import LocalEmbeddings
from choir.daemon.memory.embedding.openai_provider import EmbeddingSettings, OpenAIEmbeddings
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.embedding.queue import EmbeddingQueue, EmbeddingResult
from tests.memory import embeddings_server as fault
from tests.memory.embeddings_server import EmbeddingsServer, refused_url, vector_for
from tests.memory.support import KEY, memory_log_lines, provider


class Delivered:
    """A result sink as the store will be: it records each batch it is handed."""

    def __init__(self) -> None:
        self.batches: list[list[EmbeddingResult]] = []

    async def __call__(self, results: Sequence[EmbeddingResult]) -> None:
        self.batches.append(list(results))

    @property
    def vectors(self) -> dict[str, Vector | None]:
        return {r.chunk_id: r.vector for batch in self.batches for r in batch}


def same(vector: Vector | None, expected: list[float]) -> bool:
    return vector is not None and bool(np.allclose(vector, expected, rtol=1e-6))


async def settle() -> None:
    """Let the queue's sender task and the local server run a few turns."""
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_a_full_batch_leaves_at_once_and_the_rest_on_tick(server: EmbeddingsServer):
    delivered = Delivered()
    async with provider(server.url) as embedder, EmbeddingQueue(embedder, delivered) as queue:
        futures = [queue.enqueue(f"c{n}", f"text {n}") for n in range(37)]
        await asyncio.wait_for(asyncio.gather(*futures[:32]), 5)
        await settle()
        assert [len(batch) for batch in server.batches] == [32]  # 5 wait for the tick
        assert queue.depth == 5
        queue.tick()
        await asyncio.wait_for(asyncio.gather(*futures), 5)
        assert [len(batch) for batch in server.batches] == [32, 5]
        assert queue.depth == 0
    assert [len(batch) for batch in delivered.batches] == [32, 5]
    for n in range(37):
        assert same(delivered.vectors[f"c{n}"], vector_for(f"text {n}", 8))
        assert futures[n].result() is delivered.vectors[f"c{n}"]


async def test_a_chunk_queued_again_while_waiting_is_embedded_once_with_its_latest_text(
    server: EmbeddingsServer,
):
    delivered = Delivered()
    async with provider(server.url) as embedder, EmbeddingQueue(embedder, delivered) as queue:
        first = queue.enqueue("k1", "the user prefers tea")
        queue.enqueue("k2", "the user lives in Lyon")
        again = queue.enqueue("k1", "the user prefers coffee")
        await queue.drain()
    assert server.batches == [["the user prefers coffee", "the user lives in Lyon"]]
    assert first is again
    assert same(first.result(), vector_for("the user prefers coffee", 8))


async def test_empty_text_gets_no_vector_and_is_not_sent(server: EmbeddingsServer):
    delivered = Delivered()
    async with provider(server.url) as embedder, EmbeddingQueue(embedder, delivered) as queue:
        queue.enqueue("blank", "  \n")
        queue.enqueue("full", "a real chunk")
        await queue.drain()
    assert server.batches == [["a real chunk"]]
    assert delivered.vectors["blank"] is None
    assert delivered.vectors["full"] is not None


@pytest.mark.parametrize(
    "faults",
    [[fault.status(500)] * 4, [fault.status(429)] * 4, [fault.dimensions(3)], [fault.raw(b"{")]],
    ids=["500", "429", "wrong-dimensions", "garbage"],
)
async def test_final_failure_means_no_vector_and_one_warning(server: EmbeddingsServer, faults):
    server.fail(*faults)
    delivered = Delivered()
    with memory_log_lines() as lines:
        async with provider(server.url) as embedder, EmbeddingQueue(embedder, delivered) as queue:
            failed = [queue.enqueue(f"c{n}", f"text {n}") for n in range(3)]
            await queue.drain()
            later = queue.enqueue("next", "the endpoint is back")  # the queue still works
            await queue.drain()
    assert [f.result() for f in failed] == [None, None, None]
    assert [r.vector for r in delivered.batches[0]] == [None, None, None]
    assert later.result() is not None
    warnings = [line for line in lines if line["level"] == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0]["chunks"] == 3
    assert warnings[0]["provider"] == "test-embed"
    assert KEY not in str(lines)


async def test_enqueue_never_waits_for_a_dead_endpoint():
    delivered = Delivered()
    settings = EmbeddingSettings("test-embed", refused_url(), 8, api_key=KEY)
    slow_retries = Backoff(base_s=0.2, jitter=0.0)  # 0.2 + 0.4 + 0.8 s before giving up
    async with (
        OpenAIEmbeddings(settings, backoff=slow_retries) as embedder,
        EmbeddingQueue(embedder, delivered) as queue,
    ):
        started = time.perf_counter()
        futures = [queue.enqueue(f"c{n}", f"text {n}") for n in range(40)]
        queue.tick()
        handed_back = time.perf_counter() - started
        results = await asyncio.wait_for(asyncio.gather(*futures), 20)
        failed_after = time.perf_counter() - started
    assert handed_back < 0.5 < 1.4 <= failed_after  # the caller went on while the queue waited
    assert results == [None] * 40
    assert [len(batch) for batch in delivered.batches] == [32, 8]


async def test_a_failing_sink_does_not_stop_the_queue(server: EmbeddingsServer):
    calls: list[int] = []

    async def flaky(results: Sequence[EmbeddingResult]) -> None:
        calls.append(len(results))
        if len(calls) == 1:
            raise ConnectionError("postgres went away")

    with memory_log_lines() as lines:
        async with provider(server.url) as embedder, EmbeddingQueue(embedder, flaky) as queue:
            queue.enqueue("a", "first")
            await queue.drain()
            queue.enqueue("b", "second")
            await queue.drain()
    assert calls == [1, 1]
    assert [line["error"] for line in lines if line["level"] == "ERROR"] == [
        "ConnectionError: postgres went away"
    ]


async def test_closing_resolves_what_was_left_without_vectors(server: EmbeddingsServer):
    server.fail(fault.slow(5.0))
    async with provider(server.url) as embedder:
        async with EmbeddingQueue(embedder) as queue:
            in_flight = queue.enqueue("flying", "sent, answer slow")
            queue.tick()
            await settle()
            waiting = queue.enqueue("waiting", "never sent")
        assert in_flight.result() is None
        assert waiting.result() is None
        assert queue.enqueue("late", "after close").result() is None
        assert queue.depth == 0


async def test_the_local_model_through_the_queue():
    delivered = Delivered()
    async with EmbeddingQueue(LocalEmbeddings(), delivered) as queue:
        for n in range(40):
            queue.enqueue(f"c{n}", f"session note {n}: the build passed after fixing imports")
        await queue.drain()
    assert [len(batch) for batch in delivered.batches] == [32, 8]
    assert all(v is not None and v.shape == (256,) for v in delivered.vectors.values())
