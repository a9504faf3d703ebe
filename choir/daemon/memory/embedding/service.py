"""choird's embedding service (§11.9): the configured provider, its queue and its breaker.

    async with MemoryService(stage_source(stage)) as memory:   # nothing loads yet
        memory.connect(store.set_vectors)                       # where vectors go
        await memory.enqueue(chunk_id, text)                    # first use: provider + queue
        vector = await memory.embed_query("what port?")         # None: search by text instead

Nothing heavy loads when choird starts: the providers, numpy and (for the local model)
wordllama are imported at the first `enqueue` or `embed_query`, and the local model's weights
load in a worker thread right after. Queued chunks leave in batches of 32 or, at the latest,
`flush_after_s` (~100 ms, the cadence choird stores heartbeats at) after the first of them was
queued; a timer runs only while something waits. A failing provider costs vectors, never a
caller's time: the queue sends one batch at a time behind a circuit breaker (`service_guard`),
and a query waits at most `embedding.query_timeout_ms`.

The config is read again at each flush and each query: a change of a hot-reloadable field
(`EMBEDDING_HOT_FIELDS`: endpoint, key, timeouts — after `config apply` or `secret apply`) swaps
the provider; a change of provider, model or dimensions would mix incomparable vectors and the
stored ones' size, so it waits for choird's restart (one warning says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from choir.config.resources import EMBEDDING_HOT_FIELDS, EmbeddingConfig
from choir.logs import get_logger

if TYPE_CHECKING:  # numpy, httpx and the providers load at first use
    import httpx

    from choir.daemon.memory.embedding.backoff import Backoff
    from choir.daemon.memory.embedding.breaker import CircuitBreaker
    from choir.daemon.memory.embedding.provider import EmbeddingProvider, Vector
    from choir.daemon.memory.embedding.queue import EmbeddingQueue, ResultSink
    from choir.daemon.memory.embedding.service_guard import GuardedProvider
    from choir.daemon.memory.embedding.usage import EmbeddingMeter, Purpose
    from choir.daemon.staging.stage import ConfigStage

_log = get_logger("choir.memory.embeddings")

FLUSH_AFTER_S = 0.1
"""The longest a queued chunk waits for its batch to fill: choird's heartbeat cadence."""
DRAIN_TIMEOUT_S = 5.0
"""At shutdown, how long queued chunks may take to be embedded; the rest get no vector."""


class EmbeddingSource:
    """The embedding section of the running config, with its secret's value (never repr'd).

    A plain class, as `_Engine`: a dataclass costs choird's start ~2 ms to build."""

    __slots__ = ("api_key", "config")

    def __init__(self, config: EmbeddingConfig, api_key: str | None = None) -> None:
        self.config = config
        self.api_key = api_key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EmbeddingSource):
            return NotImplemented
        return (self.config, self.api_key) == (other.config, other.api_key)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EmbeddingSource(config={self.config!r})"

    def restart_fields(self) -> dict[str, Any]:
        """What only a restart may change (provider, model, dimensions: what a vector means)."""
        return self.config.model_dump(exclude=set(EMBEDDING_HOT_FIELDS))


def stage_source(stage: ConfigStage) -> Callable[[], EmbeddingSource]:
    """The running config's embedding section and key, read anew at every call."""

    def source() -> EmbeddingSource:
        config = stage.running.config.embedding
        secrets = stage.secrets
        if config.secret is None or config.secret not in secrets:
            return EmbeddingSource(config)
        return EmbeddingSource(config, secrets.get(config.secret).get_secret_value())

    return source


class _Engine:
    """What the first use builds."""

    __slots__ = ("guard", "http", "loading", "queue")

    def __init__(
        self, guard: GuardedProvider, queue: EmbeddingQueue, http: httpx.AsyncClient | None
    ) -> None:
        self.guard = guard
        self.queue = queue
        self.http = http
        self.loading: asyncio.Task[None] | None = None


class MemoryService:
    """Embeds chunks and queries for choird; an async context manager (closing drains)."""

    def __init__(
        self,
        source: Callable[[], EmbeddingSource],
        *,
        deliver: ResultSink | None = None,
        flush_after_s: float = FLUSH_AFTER_S,
        breaker: CircuitBreaker | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        meter: EmbeddingMeter | None = None,
    ) -> None:
        self._source = source
        self._meter = meter
        """Records each answered call as usage rows of the agents whose texts it embedded."""
        self._deliver = deliver
        self._flush_after_s = flush_after_s
        self._breaker = breaker
        self._backoff = backoff
        self._clock = clock
        self._active = source()
        """The settings the provider was built from (or will be, at first use)."""
        self._refused: EmbeddingSource | None = None
        """A restart-only change already warned about."""
        self._engine: _Engine | None = None
        self._building: asyncio.Task[_Engine | None] | None = None
        self._queued = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    # -- use ---------------------------------------------------------------------------------

    def connect(self, deliver: ResultSink) -> None:
        """Send each batch's results to `deliver` (the memory store writes the vectors)."""
        self._deliver = deliver
        if self._engine is not None:
            self._engine.queue.deliver = deliver

    async def enqueue(self, chunk_id: str, text: str) -> asyncio.Future[Vector | None]:
        """Queue a chunk; the future resolves to its vector, or None (no vector: failure, an
        outage, shutdown). Never raises; waits only for the first use's imports."""
        engine = await self._ready()
        if engine is None:  # closed: stored without a vector, for a backfill
            done: asyncio.Future[Vector | None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        future = engine.queue.enqueue(chunk_id, text)
        self._queued.set()
        return future

    async def embed_query(
        self,
        text: str,
        timeout_s: float | None = None,
        *,
        agent_id: str | None = None,
        purpose: Purpose = "query",
    ) -> Vector | None:
        """The vector of a search query, or None when it cannot be had within `timeout_s`
        (default `embedding.query_timeout_ms`), the provider fails or is paused. The call's
        usage is `agent_id`'s (None: recorded for nobody, e.g. a re-embed's probe)."""
        if not text.strip():
            return None
        wait = timeout_s if timeout_s is not None else self._active.config.query_timeout_ms / 1000
        try:
            async with asyncio.timeout(wait):  # the first use's imports count too
                engine = await self._ready()
                if engine is None:
                    return None
                self._reload(engine)
                if engine.guard.paused:  # known down: the search won't wait
                    return None
                vectors = await self._query(engine, text, agent_id, purpose)
        except TimeoutError:
            _log.info("query embedding timed out", fields={"timeout_s": wait})
            return None
        except Exception as exc:  # any provider failure: the search goes on by text
            _log.info("query embedding failed", fields={"error": f"{type(exc).__name__}: {exc}"})
            return None
        vector = vectors[0] if len(vectors) == 1 else None
        return vector if vector is not None and vector.shape == (engine.guard.dimensions,) else None

    async def _query(
        self, engine: _Engine, text: str, agent_id: str | None, purpose: Purpose
    ) -> list[Vector]:
        began = time.monotonic()
        vectors, tokens = await engine.guard.query(text)
        if self._meter is not None and agent_id is not None:
            latency_ms = int((time.monotonic() - began) * 1000)
            self._meter.embedded(
                [agent_id],
                [text],
                model=self.provider_name,
                purpose=purpose,
                latency_ms=latency_ms,
                tokens=tokens,
            )
        return vectors

    def _indexed(
        self, chunk_ids: Sequence[str], texts: Sequence[str], latency_ms: int, tokens: int | None
    ) -> None:
        """The queue's call for memory rows, billed to the agents whose rows they are."""
        if self._meter is not None:
            self._meter.indexed(
                chunk_ids, texts, model=self.provider_name, latency_ms=latency_ms, tokens=tokens
            )

    @property
    def depth(self) -> int:
        """Chunks waiting or being embedded."""
        return self._engine.queue.depth if self._engine is not None else 0

    @property
    def provider_name(self) -> str:
        """Who embeds: `local` or the model id."""
        return self._active.config.model_name

    @property
    def dimensions(self) -> int:
        """The size of every vector (the store's `vector(N)`)."""
        return self._active.config.vector_dimensions

    @property
    def paused(self) -> bool:
        """Whether the breaker keeps the provider from being called now."""
        return self._engine is not None and self._engine.guard.paused

    @property
    def breaker(self) -> str:
        """The breaker's state: `closed`, `open`, or `half_open` (its probe call is out)."""
        return "closed" if self._engine is None else self._engine.guard.breaker.state.value

    # -- first use ---------------------------------------------------------------------------

    async def _ready(self) -> _Engine | None:
        """The engine, built once at the first call; None once the service is closed (or its
        provider could not be built). A caller that gives up waiting (a query's timeout) does
        not cancel the build: the next caller gets it."""
        if self._engine is not None or self._closed:
            return self._engine
        if self._building is None:
            self._building = asyncio.create_task(self._start(), name="embedding-start")
        return await asyncio.shield(self._building)

    async def _start(self) -> _Engine | None:
        try:
            engine = await asyncio.to_thread(self._build)  # numpy's imports off the event loop
        except Exception as exc:  # what config check cannot see (a broken install)
            _log.error(
                "embedding unavailable: chunks are stored without vectors",
                fields={
                    "provider": self._active.config.model_name,
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            return None
        if self._closed:  # closed while building: nothing runs yet but the HTTP client
            if engine.http is not None:
                await engine.http.aclose()
            return None
        engine.queue.start()
        engine.loading = self._preload(engine.guard.inner)
        self._flusher = asyncio.create_task(self._flush_loop(), name="embedding-flush")
        self._engine = engine
        return engine

    def _build(self) -> _Engine:
        from choir.daemon.memory.embedding.breaker import CircuitBreaker
        from choir.daemon.memory.embedding.queue import EmbeddingQueue
        from choir.daemon.memory.embedding.service_guard import GuardedProvider

        http = None
        if not self._active.config.local:
            import httpx

            http = httpx.AsyncClient()
        provider = self._provider(self._active, http)
        guard = GuardedProvider(provider, self._breaker or CircuitBreaker(), self._clock)
        _log.info(
            "embedding provider ready",
            fields={"provider": provider.name, "dimensions": provider.dimensions},
        )
        queue = EmbeddingQueue(guard, self._deliver, warn=False, embedded=self._indexed)
        return _Engine(guard, queue, http)

    def _provider(
        self, source: EmbeddingSource, http: httpx.AsyncClient | None
    ) -> EmbeddingProvider:
        if source.config.local:
            from choir.daemon.memory.embedding.local_provider import LocalEmbeddings

            return LocalEmbeddings()
        from choir.daemon.memory.embedding.openai_provider import (
            DEFAULT_BACKOFF,
            EmbeddingSettings,
            OpenAIEmbeddings,
        )

        settings = EmbeddingSettings.from_config(source.config, api_key=source.api_key)
        return OpenAIEmbeddings(settings, http=http, backoff=self._backoff or DEFAULT_BACKOFF)

    def _preload(self, provider: EmbeddingProvider) -> asyncio.Task[None] | None:
        """Load the local model's weights now, in a thread, rather than in the first batch."""
        load = getattr(provider, "load", None)
        if load is None:
            return None
        task: asyncio.Task[None] = asyncio.create_task(load(), name="embedding-model-load")
        task.add_done_callback(_consume)  # a failure shows as each batch's own error
        return task

    # -- the timer and reloads ---------------------------------------------------------------

    async def _flush_loop(self) -> None:
        """Flush on a full batch (the queue does) or `flush_after_s` after the first chunk."""
        while True:
            await self._queued.wait()
            await asyncio.sleep(self._flush_after_s)
            self._queued.clear()
            engine = self._engine
            if engine is not None:
                self._reload(engine)
                engine.queue.tick()

    def _reload(self, engine: _Engine) -> None:
        """Follow a hot-reloadable change of the running config; warn once about others."""
        current = self._source()
        if current == self._active or current == self._refused:
            return
        if current.restart_fields() != self._active.restart_fields():
            self._refused = current
            _log.warning(
                "the embedding model changed in the running config: restart choird to use it "
                "(`choir restart`; stored memory then needs re-embedding); embedding goes on "
                "with the old one",
                fields={"running": self._active.config.model_name},
            )
            return
        try:
            provider = self._provider(current, engine.http)
        except Exception as exc:  # a config check passed it: keep the working one
            _log.warning("embedding reload failed", fields={"error": str(exc)})
            self._refused = current
            return
        engine.guard.replace(provider)
        self._active, self._refused = current, None
        _log.info("embedding provider reloaded", fields={"provider": provider.name})

    # -- shutdown ----------------------------------------------------------------------------

    async def aclose(self, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Embed what is queued for at most `drain_timeout_s`, then stop; chunks still waiting
        get no vector (stored without one, for a backfill)."""
        self._closed = True
        if self._building is not None:
            await self._building  # returns at once, or after the build (then closes it)
        engine, self._engine = self._engine, None
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        if engine is None:
            return
        try:
            async with asyncio.timeout(drain_timeout_s):
                await engine.queue.drain()
        except TimeoutError:
            _log.warning(
                "embedding stopped before its queue drained; those chunks have no vectors",
                fields={"chunks": engine.queue.depth, "waited_s": drain_timeout_s},
            )
        await engine.queue.aclose()
        if engine.loading is not None and not engine.loading.done():
            with contextlib.suppress(Exception):
                await engine.loading  # a thread cannot be cancelled: let the load finish
        if engine.http is not None:
            await engine.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _consume(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
