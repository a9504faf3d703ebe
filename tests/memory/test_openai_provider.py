"""The OpenAI-compatible provider against a local server speaking `/v1/embeddings`."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from choir.config.resources import EmbeddingConfig
from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.openai_provider import EmbeddingSettings
from choir.errors import ConfigError
from tests.memory import embeddings_server as fault
from tests.memory.embeddings_server import EmbeddingsServer, refused_url, vector_for
from tests.memory.support import KEY, memory_log_lines, provider

TEXTS = [f"chunk {n}: the tool call read src/module_{n}.py" for n in range(70)]


async def test_sends_batches_of_32_and_orders_vectors_by_index(server: EmbeddingsServer):
    async with provider(server.url) as embedder:
        vectors = await embedder.embed(TEXTS)
    assert [len(batch) for batch in server.batches] == [32, 32, 6]
    assert [b for batch in server.batches for b in batch] == TEXTS
    assert server.authorizations == [f"Bearer {KEY}"] * 3
    for text, vector in zip(TEXTS, vectors, strict=True):  # the server answers in reverse order
        assert vector.dtype == np.float32
        assert np.allclose(vector, vector_for(text, 8), rtol=1e-6)


@pytest.mark.parametrize(
    "first",
    [fault.status(429), fault.status(500), fault.status(503)],
    ids=["429", "500", "503"],
)
async def test_retries_rate_limits_and_server_errors(server: EmbeddingsServer, first):
    server.fail(first, first)
    with memory_log_lines() as lines:
        async with provider(server.url) as embedder:
            vectors = await embedder.embed(TEXTS[:3])
    assert len(server.batches) == 3
    assert len(vectors) == 3
    retries = [line for line in lines if line["message"] == "embedding call failed; retrying"]
    assert [line["retry"] for line in retries] == [1, 2]


async def test_gives_up_after_three_retries(server: EmbeddingsServer):
    server.fail(*[fault.status(502)] * 4)
    async with provider(server.url) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(TEXTS[:3])
    assert len(server.batches) == 4
    assert caught.value.kind is EmbeddingErrorKind.SERVER_ERROR
    assert caught.value.status == 502
    assert "fault 502" in caught.value.message  # the provider's own words


async def test_waits_as_long_as_retry_after_asks(server: EmbeddingsServer):
    server.fail(fault.status(429, headers={"Retry-After": "0.3"}))
    async with provider(server.url) as embedder:
        started = time.monotonic()
        await embedder.embed(TEXTS[:1])
    assert time.monotonic() - started >= 0.3
    assert len(server.batches) == 2


async def test_a_slow_answer_times_out_and_is_tried_again(server: EmbeddingsServer):
    server.fail(fault.slow(5.0))
    async with provider(server.url, timeout_s=0.3) as embedder:
        started = time.monotonic()
        vectors = await embedder.embed(TEXTS[:2])
    assert time.monotonic() - started < 3.0
    assert len(server.batches) == 2
    assert np.allclose(vectors[1], vector_for(TEXTS[1], 8), rtol=1e-6)


async def test_slow_every_time_fails_as_a_timeout(server: EmbeddingsServer):
    server.fail(*[fault.slow(5.0)] * 4)
    async with provider(server.url, timeout_s=0.2) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(TEXTS[:2])
    assert caught.value.kind is EmbeddingErrorKind.TIMEOUT
    assert "no answer within 0.2 s" in caught.value.message


async def test_connection_refused_is_retried_then_unreachable():
    url = refused_url()
    with memory_log_lines() as lines:
        async with provider(url) as embedder:
            with pytest.raises(EmbeddingError) as caught:
                await embedder.embed(TEXTS[:2])
    assert caught.value.kind is EmbeddingErrorKind.UNREACHABLE
    assert "cannot reach 127.0.0.1:" in caught.value.message
    assert "embedding.endpoint" in caught.value.message
    assert len([line for line in lines if line["kind"] == "unreachable"]) == 3


async def test_wrong_dimensions_are_refused_at_once(server: EmbeddingsServer):
    server.fail(fault.dimensions(12))
    async with provider(server.url) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(TEXTS[:2])
    assert len(server.batches) == 1  # the same model answers the same size: no retry
    assert caught.value.kind is EmbeddingErrorKind.WRONG_DIMENSIONS
    assert "12 dimensions, not the 8 configured" in caught.value.message
    assert "embedding.dimensions" in caught.value.message


GOOD = {"index": 0, "embedding": [0.5] * 8}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>502 Bad Gateway</html>", "the body is not JSON"),
        (b'{"data": [{"index": 0, "embedding": [0.1, 0.2', "the body is not JSON"),
        (b"[]", "it has no `data` list"),
        (b'{"object": "list"}', "it has no `data` list"),
        (b'{"data": []}', "it holds 0 embeddings for 2 texts"),
        (b'{"data": [1, 2]}', "item 0 is not an object"),
        (
            b'{"data": [{"index": 0, "embedding": [0,0,0,0,0,0,0,0]},'
            b' {"index": 0, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "index 0 appears twice",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [0,0,0,0,0,0,0,0]},'
            b' {"index": 7, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "item 1 has index 7, not one of 0..1",
        ),
        (
            b'{"data": [{"index": 0, "embedding": ["1","2","3","4","5","6","7","8"]},'
            b' {"index": 1, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "embedding 0 is not a list of numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": "AAAAAAAA"},'
            b' {"index": 1, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "embedding 0 is not a list of numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [[1],[2],[3],[4],[5],[6],[7],[8]]},'
            b' {"index": 1, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "embedding 0 is not a list of numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [1e300,0,0,0,0,0,0,0]},'
            b' {"index": 1, "embedding": [0,0,0,0,0,0,0,0]}]}',
            "embedding 0 holds a value too large for float32",
        ),
    ],
)
async def test_garbage_is_refused_with_the_reason(server: EmbeddingsServer, body: bytes, why: str):
    server.fail(fault.raw(body))
    async with provider(server.url) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(TEXTS[:2])
    assert len(server.batches) == 1
    assert caught.value.kind is EmbeddingErrorKind.MALFORMED
    assert why in caught.value.message
    assert "nothing was stored" in caught.value.message


@pytest.mark.parametrize(("code", "fix"), [(401, "embedding.secret"), (404, "embedding.model")])
async def test_a_refused_request_is_not_retried(server: EmbeddingsServer, code: int, fix: str):
    server.fail(fault.status(code))
    async with provider(server.url) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(TEXTS[:1])
    assert len(server.batches) == 1
    assert caught.value.kind is EmbeddingErrorKind.HTTP_ERROR
    assert fix in caught.value.message


async def test_the_key_is_never_in_errors_or_logs(server: EmbeddingsServer):
    echo = {"error": {"message": f"invalid key {KEY} for this model"}}
    server.fail(fault.status(500, echo), fault.status(401, echo))
    handler = Recorder()
    records = handler.records
    logger = logging.getLogger("choir.memory.embeddings")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        async with provider(server.url) as embedder:
            with pytest.raises(EmbeddingError) as caught:
                await embedder.embed(TEXTS[:1])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert server.authorizations == [f"Bearer {KEY}"] * 2  # it was sent, to the server only
    assert "invalid key [REDACTED]" in caught.value.message
    seen = [caught.value.message, repr(caught.value), repr(embedder.settings)]
    seen += [f"{r.getMessage()} {r.__dict__}" for r in records]
    assert records
    assert all(KEY not in text for text in seen)


class Recorder(logging.Handler):
    """Keeps the records themselves: what a formatter's redaction would hide is still seen."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_settings_come_from_the_embedding_section():
    config = EmbeddingConfig(provider="openrouter", endpoint="http://127.0.0.1:1/v1", dimensions=8)
    settings = EmbeddingSettings.from_config(config, api_key=KEY)
    assert (settings.model, settings.dimensions) == ("text-embedding-3-small", 8)
    assert KEY not in repr(settings)
    known = EmbeddingSettings.from_config(EmbeddingConfig(provider="openrouter"), api_key=KEY)
    assert (known.endpoint, known.dimensions) == ("https://openrouter.ai/api/v1", 1536)
    with pytest.raises(ConfigError, match=r"embedding\.endpoint: required"):
        EmbeddingSettings.from_config(EmbeddingConfig(provider="my-server"), api_key=None)
