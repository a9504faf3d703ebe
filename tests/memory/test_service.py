"""choird's embedding service (§11.9): the real local model, and an OpenAI-compatible server
with faults — down, 429/5xx, wrong dimensions, slow — behind the circuit breaker; config reload
through the real two-phase config stage; a bounded drain at shutdown."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from choir.config import SecretStore, load_home
from choir.config.resources import EmbeddingConfig
from choir.daemon.memory.embedding.breaker import CircuitBreaker
from choir.daemon.memory.embedding.provider import Vector
from choir.daemon.memory.embedding.queue import EmbeddingResult
from choir.daemon.memory.embedding.service import EmbeddingSource, MemoryService, stage_source
from choir.daemon.staging.stage import ConfigStage
from choir.home import ChoirHome
from tests.harness.homes import initialized, read_config, write_config
from tests.memory import embeddings_server as fault
from tests.memory.embeddings_server import EmbeddingsServer, vector_for
from tests.memory.support import FAST, KEY, memory_log_lines


class Delivered:
    """A result sink as the memory store's `set_vectors` will be: records what it is handed."""

    def __init__(self) -> None:
        self.batches: list[list[EmbeddingResult]] = []

    async def __call__(self, results: Sequence[EmbeddingResult]) -> None:
        self.batches.append(list(results))

    @property
    def vectors(self) -> dict[str, Vector | None]:
        return {r.chunk_id: r.vector for batch in self.batches for r in batch}


def remote(url: str, dims: int = 8, **fields: Any) -> EmbeddingSource:
    config = EmbeddingConfig(
        provider="test-server", model="test-embed", endpoint=url, dimensions=dims, **fields
    )
    return EmbeddingSource(config, KEY)


def service(source: EmbeddingSource, **options: Any) -> MemoryService:
    options.setdefault("flush_after_s", 0.02)
    options.setdefault("backoff", FAST)
    return MemoryService(lambda: source, deliver=Delivered(), **options)


def delivered(memory: MemoryService) -> Delivered:
    sink = memory._deliver  # the sink the test handed in
    assert isinstance(sink, Delivered)
    return sink


async def embedded(memory: MemoryService, chunk_id: str, text: str) -> Vector | None:
    """Queue a chunk and wait for its outcome (the flush timer sends it, no tick)."""
    future = await memory.enqueue(chunk_id, text)
    return await asyncio.wait_for(future, 10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def cosine(a: Vector, b: Vector) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_the_local_model_embeds_chunks_and_queries():
    async with MemoryService(lambda: EmbeddingSource(EmbeddingConfig())) as memory:
        sink = Delivered()
        memory.connect(sink)  # before anything starts the engine (a warm one starts at once)
        # a query that cannot wait for the first use's start degrades; the start goes on (no
        # time at all: another test of this worker may have imported the model already)
        assert await memory.embed_query("the cat sat on the mat", timeout_s=0) is None
        futures = [
            await memory.enqueue(f"c{n}", f"session note {n}: the cat sat on the mat")
            for n in range(40)
        ]
        vectors = await asyncio.wait_for(asyncio.gather(*futures), 30)
        cat = await memory.embed_query("the cat sat on the mat", timeout_s=30)
        kitten = await memory.embed_query("a kitten rests on a rug", timeout_s=30)
        taxes = await memory.embed_query("quarterly tax filing deadline", timeout_s=30)
    assert all(v is not None and v.shape == (256,) for v in vectors)
    assert [len(batch) for batch in sink.batches] == [32, 8]
    assert (memory.provider_name, memory.dimensions) == ("local", 256)
    assert cat is not None
    assert kitten is not None
    assert taxes is not None
    assert cosine(cat, kitten) > cosine(cat, taxes) + 0.2


async def test_queued_chunks_leave_on_the_flush_timer(server: EmbeddingsServer):
    async with service(remote(server.url)) as memory:
        futures = [await memory.enqueue(f"c{n}", f"text {n}") for n in range(5)]
        vectors = await asyncio.wait_for(asyncio.gather(*futures), 5)
        assert memory.depth == 0
    assert server.batches == [[f"text {n}" for n in range(5)]]  # one batch, no tick needed
    for n, vector in enumerate(vectors):
        assert vector is not None
        assert np.allclose(vector, vector_for(f"text {n}", 8), rtol=1e-6)
    assert server.authorizations == [f"Bearer {KEY}"]
    assert set(delivered(memory).vectors) == {f"c{n}" for n in range(5)}


async def test_a_dead_endpoint_pauses_embedding_and_it_recovers():
    port = free_port()  # nothing listens there yet
    breaker = CircuitBreaker(threshold=2, cooldown_s=0.5)
    memory = service(remote(f"http://127.0.0.1:{port}/v1"), breaker=breaker)
    with memory_log_lines() as lines:
        async with memory:
            assert await embedded(memory, "a", "first") is None
            assert not memory.paused
            assert await embedded(memory, "b", "second") is None
            assert memory.paused  # two failed batches in a row
            started = time.monotonic()
            assert await embedded(memory, "c", "third, while paused") is None
            assert await memory.embed_query("anything", timeout_s=5) is None
            assert time.monotonic() - started < 0.4  # refused at once, nothing waited
            async with EmbeddingsServer(port=port) as server:  # the endpoint comes back
                await asyncio.sleep(0.6)  # the cool-down ends
                assert await embedded(memory, "d", "after the outage") is not None
                assert not memory.paused
                assert await embedded(memory, "e", "and after") is not None
                assert server.batches == [["after the outage"], ["and after"]]
    assert delivered(memory).vectors["c"] is None
    warnings = [line for line in lines if line["level"] == "WARNING"]
    assert len(warnings) == 1  # one per outage, not one per batch
    assert warnings[0]["kind"] == "unreachable"
    messages = [line["message"] for line in lines]
    assert messages.count("embedding paused after repeated failures") == 1
    [recovered] = [line for line in lines if line["message"] == "embedding works again"]
    assert recovered["chunks_without_vectors"] == 3
    assert KEY not in json.dumps(lines)


async def test_a_search_finds_the_endpoint_back_after_an_outage_with_no_batch_to_probe():
    """Nothing is written after the outage: the searches themselves probe once the cool-down
    is over (they used to skip the endpoint for as long as no batch came to probe it)."""
    port = free_port()
    breaker = CircuitBreaker(threshold=1, cooldown_s=0.5)
    memory = service(remote(f"http://127.0.0.1:{port}/v1"), breaker=breaker)
    async with memory:
        assert await embedded(memory, "a", "during the outage") is None
        assert (memory.paused, memory.breaker) == (True, "open")
        assert await memory.embed_query("skipped at once", timeout_s=5) is None
        async with EmbeddingsServer(port=port) as server:  # the endpoint comes back
            await asyncio.sleep(0.6)  # the cool-down ends
            assert (memory.paused, memory.breaker) == (False, "open")  # the next call probes
            assert await memory.embed_query("found again", timeout_s=5) is not None
            assert (memory.paused, memory.breaker) == (False, "closed")
            assert server.batches == [["found again"]]


async def test_a_search_that_gives_up_on_the_probe_does_not_leave_embedding_refused():
    """The probe is a search's query whose timeout runs out: the next call probes again."""
    port = free_port()
    breaker = CircuitBreaker(threshold=1, cooldown_s=0.2)
    memory = service(remote(f"http://127.0.0.1:{port}/v1"), breaker=breaker)
    async with memory:
        assert await embedded(memory, "a", "during the outage") is None
        async with EmbeddingsServer(port=port, faults=deque([fault.slow(2.0)])) as server:
            await asyncio.sleep(0.3)
            assert await memory.embed_query("too slow", timeout_s=0.3) is None
            assert not memory.paused  # not waiting for a probe that was given up
            assert await embedded(memory, "b", "after it") is not None
            assert server.batches[-1] == ["after it"]


@pytest.mark.parametrize(
    "faults",
    [[fault.status(429), fault.status(503)], [fault.status(500)]],
    ids=["429-then-503", "500"],
)
async def test_rate_limits_and_server_errors_are_retried_within_a_batch(
    server: EmbeddingsServer, faults: list[fault.Fault]
):
    server.fail(*faults)
    with memory_log_lines() as lines:
        async with service(remote(server.url)) as memory:
            vector = await embedded(memory, "a", "retried text")
    assert vector is not None
    assert np.allclose(vector, vector_for("retried text", 8), rtol=1e-6)
    assert len(server.batches) == len(faults) + 1
    assert [line for line in lines if line["level"] == "WARNING"] == []
    assert not memory.paused


async def test_vectors_of_the_wrong_dimension_are_refused(server: EmbeddingsServer):
    server.dimensions = 16  # the model answers 16 numbers; config says 8
    with memory_log_lines() as lines:
        async with service(remote(server.url)) as memory:
            assert await embedded(memory, "a", "some chunk") is None
            assert await memory.embed_query("a query", timeout_s=5) is None
    assert delivered(memory).vectors == {"a": None}
    [warning] = [line for line in lines if line["level"] == "WARNING"]
    assert warning["kind"] == "wrong_dimensions"


async def test_a_slow_endpoint_holds_a_query_no_longer_than_its_timeout(
    server: EmbeddingsServer,
):
    server.fail(fault.slow(5.0), fault.slow(5.0))
    async with service(remote(server.url, query_timeout_ms=200)) as memory:
        started = time.monotonic()
        assert await memory.embed_query("what port does it use?", timeout_s=0.3) is None
        assert await memory.embed_query("and the default timeout?") is None  # 200 ms
        assert time.monotonic() - started < 1.5
        assert not memory.paused  # a slow query is not an outage


async def test_closing_drains_within_its_bound(server: EmbeddingsServer):
    server.fail(fault.slow(10.0))
    memory = service(remote(server.url))
    with memory_log_lines() as lines:
        async with memory:
            future = await memory.enqueue("a", "slow to embed")
            await asyncio.sleep(0.1)  # the batch is in flight
            started = time.monotonic()
            await memory.aclose(drain_timeout_s=0.3)
            assert time.monotonic() - started < 2.0
    assert future.result() is None
    assert any(line["message"].startswith("embedding stopped before") for line in lines)
    late = await memory.enqueue("b", "after close")
    assert late.result() is None
    assert await memory.embed_query("after close") is None


# -- reload through the real config stage ----------------------------------------------------


@pytest.fixture
async def second_server() -> AsyncIterator[EmbeddingsServer]:
    async with EmbeddingsServer() as running:
        yield running


def staged_home(tmp_path: Path, embedding: dict[str, Any], key: str) -> ChoirHome:
    home = initialized(ChoirHome(tmp_path / "h"))
    data = read_config(home)
    data["embedding"] = embedding
    write_config(home, data)
    set_key(home, key)
    return home


def set_key(home: ChoirHome, key: str) -> None:
    SecretStore.empty().with_secret("embed-key", key).save(home.secrets_file)


async def apply(stage: ConfigStage, home: ChoirHome, **embedding: Any) -> None:
    """Edit config.json, then `choirctl config load` + `config apply` as choird runs them."""
    data = read_config(home)
    data["embedding"].update(embedding)
    write_config(home, data)
    await stage.load()
    stage.apply()


async def test_config_apply_and_secret_apply_swap_the_provider(
    tmp_path: Path, server: EmbeddingsServer, second_server: EmbeddingsServer
):
    embedding = {
        "provider": "test-server",
        "model": "test-embed",
        "endpoint": server.url,
        "dimensions": 8,
        "secret": "embed-key",
    }
    home = staged_home(tmp_path, embedding, "key-one-1234")
    stage = ConfigStage(load_home(home))
    memory = MemoryService(stage_source(stage), deliver=Delivered(), flush_after_s=0.02)
    with memory_log_lines() as lines:
        async with memory:
            assert await embedded(memory, "a", "before") is not None
            await apply(stage, home, endpoint=second_server.url)  # hot: the endpoint moved
            set_key(home, "key-two-5678")
            await stage.reload_secrets()  # `choirctl secret apply`: the key rotated
            assert await embedded(memory, "b", "after") is not None
            await apply(stage, home, model="another-model")  # restart-only: not followed
            assert await embedded(memory, "c", "model changed") is not None
            assert await embedded(memory, "d", "still the same") is not None
    assert (server.batches, server.authorizations) == ([["before"]], ["Bearer key-one-1234"])
    assert second_server.batches == [["after"], ["model changed"], ["still the same"]]
    assert set(second_server.authorizations) == {"Bearer key-two-5678"}
    assert set(second_server.models) == {"test-embed"}
    restart = [line for line in lines if "restart choird" in line["message"]]
    assert len(restart) == 1  # said once
    assert "key-one-1234" not in json.dumps(lines)
    assert "key-two-5678" not in json.dumps(lines)
