"""The embedding queue of §11.9: chunks in, vectors out in batches, never an error back.

    async with EmbeddingQueue(provider, deliver=store.write_vectors) as queue:
        queue.enqueue(chunk.id, chunk.text)     # never waits, never raises
        ...
        queue.tick()                            # the heartbeat tick: send partial batches too

A batch leaves when 32 chunks wait or at the next tick. One batch is in flight at a time, so
results arrive in the order chunks were queued: a chunk queued again after its first text left
gets its latest vector last. A batch whose embedding fails for good (after the provider's own
retries) or whose answer breaks the provider contract gives each of its chunks no vector and logs
one warning: the store keeps such chunks without vectors, found by full-text search, until a
backfill embeds them. Results go to `deliver` per batch, and to the future `enqueue` returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

import numpy as np

from choir.daemon.memory.embedding.batching import PendingChunks
from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.provider import EmbeddingProvider, Vector, embed_counted
from choir.logs import get_logger

_log = get_logger("choir.memory.embeddings")


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """The outcome for one chunk."""

    chunk_id: str
    """The id it was enqueued with."""
    vector: Vector | None
    """None: no vector (failure, or a text with nothing to embed); the chunk stays searchable
    by text until a backfill embeds it."""


ResultSink = Callable[[Sequence[EmbeddingResult]], Awaitable[None]]
"""Receives each batch's results (the memory store writes them in one statement)."""
Embedded = Callable[[Sequence[str], Sequence[str], int, int | None], None]
"""Told of each call the provider answered: its chunk ids, texts, latency (ms) and input tokens
(None: not reported) — the usage record (`choir.daemon.memory.embedding.usage`)."""


@dataclass(slots=True)
class _Waiting:
    text: str
    future: asyncio.Future[Vector | None]


class EmbeddingQueue:
    """Batches chunks for one provider; an async context manager that owns its sender task."""

    def __init__(
        self,
        provider: EmbeddingProvider,
        deliver: ResultSink | None = None,
        *,
        batch_size: int = 32,
        warn: bool = True,
        embedded: Embedded | None = None,
    ) -> None:
        self.provider = provider
        self.embedded = embedded
        """Who records each answered call's usage."""
        """Who embeds; replaced as a whole when the configuration is reloaded."""
        self.deliver = deliver
        """Where each batch's results go; set later when the store comes after the queue."""
        self._warn_failures = warn
        """False when the provider reports its own failures (`service_guard`: one warning per
        outage, not one per batch)."""
        self._pending: PendingChunks[_Waiting] = PendingChunks(batch_size)
        self._in_flight: list[tuple[str, _Waiting]] = []
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._sender: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def depth(self) -> int:
        """Chunks waiting or being embedded (`memory stats`' queue depth)."""
        return len(self._pending) + len(self._in_flight)

    def enqueue(self, chunk_id: str, text: str) -> asyncio.Future[Vector | None]:
        """Queue a chunk; the future resolves to its vector, or None. Never blocks or raises."""
        waiting = self._pending.get(chunk_id)
        if waiting is not None:  # still queued: embed only the latest text
            waiting.text = text
            return waiting.future
        future: asyncio.Future[Vector | None] = asyncio.get_running_loop().create_future()
        if self._closed:
            future.set_result(None)
            return future
        self._pending.add(chunk_id, _Waiting(text, future))
        self._drained.clear()
        if self._pending.full:
            self._wake.set()
        return future

    def tick(self) -> None:
        """Send what waits, even a partial batch (called on the heartbeat tick)."""
        self._pending.request_flush()
        self._wake.set()

    async def drain(self) -> None:
        """Send everything queued so far and wait until every result is delivered."""
        self.tick()
        await self._drained.wait()

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (batch := self._pending.next_batch()) is not None:
                self._in_flight = batch
                await self._send(batch)
                self._in_flight = []
            if not self._pending:
                self._drained.set()

    async def _send(self, batch: list[tuple[str, _Waiting]]) -> None:
        texts = [waiting.text for _, waiting in batch]
        vectors = await self._embed(texts, [chunk_id for chunk_id, _ in batch])
        results = [
            EmbeddingResult(chunk_id, v) for (chunk_id, _), v in zip(batch, vectors, strict=True)
        ]
        for (_, waiting), vector in zip(batch, vectors, strict=True):
            if not waiting.future.done():
                waiting.future.set_result(vector)
        if self.deliver is not None:
            try:
                await self.deliver(results)
            except Exception as exc:  # a store fault must not stop the queue
                _log.error(
                    "embedding results not delivered",
                    fields={"chunks": len(results), "error": f"{type(exc).__name__}: {exc}"},
                )

    async def _embed(self, texts: list[str], chunk_ids: list[str]) -> list[Vector | None]:
        """A vector per text, or None for each when the batch fails; logs one warning then."""
        vectors: list[Vector | None] = [None] * len(texts)
        sent = [i for i, text in enumerate(texts) if text.strip()]  # nothing to embed: no vector
        if not sent:
            return vectors
        try:
            began = time.monotonic()
            answered, tokens = await embed_counted(self.provider, [texts[i] for i in sent])
            self._record(sent, texts, chunk_ids, began, tokens)
            _check(answered, len(sent), self.provider)
        except EmbeddingError as error:
            self._warn(len(texts), error.kind.value, error.message)
            return vectors
        except Exception as exc:  # a provider bug must cost vectors, not the queue
            self._warn(len(texts), "unexpected", f"{type(exc).__name__}: {exc}")
            return vectors
        for i, vector in zip(sent, answered, strict=True):
            vectors[i] = vector
        return vectors

    def _record(
        self,
        sent: list[int],
        texts: list[str],
        chunk_ids: list[str],
        began: float,
        tokens: int | None,
    ) -> None:
        """The answered call's usage, billed whether or not its answer is usable."""
        if self.embedded is None:
            return
        latency_ms = int((time.monotonic() - began) * 1000)
        try:
            self.embedded(
                [chunk_ids[i] for i in sent], [texts[i] for i in sent], latency_ms, tokens
            )
        except Exception as exc:  # a usage record must never cost vectors
            _log.warning("embedding usage not recorded", fields={"error": str(exc)})

    def _warn(self, chunks: int, kind: str, error: str) -> None:
        if not self._warn_failures:
            return
        _log.warning(
            "embedding failed; chunks kept without vectors until a backfill",
            fields={"provider": self.provider.name, "chunks": chunks, "kind": kind, "error": error},
        )

    async def aclose(self) -> None:
        """Stop sending; chunks still queued or in flight resolve to None and are not delivered
        (the store holds them without vectors, for a backfill)."""
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None
        left, self._in_flight = [*self._in_flight, *self._pending.take_all()], []
        for _, waiting in left:
            if not waiting.future.done():
                waiting.future.set_result(None)
        self._drained.set()

    def start(self) -> None:
        """Start sending (what entering the context does)."""
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_loop(), name="embedding-queue")

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _check(vectors: Sequence[Vector], count: int, provider: EmbeddingProvider) -> None:
    """Refuse an answer that breaks the provider contract: one finite vector per text, each of
    the provider's dimensions."""
    if len(vectors) != count:
        raise EmbeddingError(
            EmbeddingErrorKind.MALFORMED,
            f"embedding provider {provider.name!r} answered {len(vectors)} vectors for "
            f"{count} texts",
        )
    for vector in vectors:
        if vector.shape != (provider.dimensions,):
            raise EmbeddingError(
                EmbeddingErrorKind.WRONG_DIMENSIONS,
                f"embedding provider {provider.name!r} answered a vector of shape {vector.shape}, "
                f"not ({provider.dimensions},)",
            )
        if not np.isfinite(vector).all():
            raise EmbeddingError(
                EmbeddingErrorKind.MALFORMED,
                f"embedding provider {provider.name!r} answered a vector with NaN or infinity",
            )
