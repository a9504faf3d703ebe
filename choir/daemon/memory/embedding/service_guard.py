"""The embedding provider behind its circuit breaker, and what choird logs about an outage.

`GuardedProvider` is what the embedding queue calls. While the breaker is open it refuses a batch
at once (`PAUSED`): the chunks are stored without vectors and nothing waits on a dead endpoint.
An outage — from the first failed batch to the next success — is logged as one warning when it
starts, one line when the breaker pauses the calls, and one when embedding works again (with how
many chunks were left without vectors meanwhile, for the backfill).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from choir.daemon.memory.embedding.breaker import BreakerState, Change, CircuitBreaker
from choir.daemon.memory.embedding.errors import EmbeddingError, EmbeddingErrorKind
from choir.daemon.memory.embedding.provider import EmbeddingProvider, Vector, embed_counted
from choir.logs import get_logger

_log = get_logger("choir.memory.embeddings")


class GuardedProvider:
    """An `EmbeddingProvider` that stops calling `inner` while it keeps failing."""

    def __init__(
        self,
        inner: EmbeddingProvider,
        breaker: CircuitBreaker,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.breaker = breaker
        self._clock = clock
        self.unembedded = 0
        """Chunks left without a vector since the outage began (0 when there is none)."""

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def paused(self) -> bool:
        """Whether calls are refused now (the breaker cooling down, or its probe out)."""
        return self.breaker.refusing(self._clock())

    def replace(self, inner: EmbeddingProvider) -> None:
        """Embed with `inner` from the next batch on (a reloaded config), with a fresh breaker:
        a new endpoint or key deserves to be tried."""
        self.inner = inner
        self.breaker.succeeded()
        self.unembedded = 0

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        return (await self.embed_counted(texts))[0]

    async def embed_counted(self, texts: Sequence[str]) -> tuple[list[Vector], int | None]:
        """`embed`, with the input tokens the provider reported (`provider.embed_counted`)."""
        return await self._call(texts, len(texts))

    async def query(self, text: str) -> tuple[list[Vector], int | None]:
        """A search's vector. While the breaker is closed, outside its count: a query's short
        timeout is no verdict on the endpoint. Once it has opened and cooled down, the query is
        its probe like any call, so searches alone find an endpoint that came back (and one
        still down costs one timeout per cool-down, not one per search)."""
        if self.breaker.state is BreakerState.CLOSED:
            return await embed_counted(self.inner, [text])
        return await self._call([text], 0)

    async def _call(self, texts: Sequence[str], chunks: int) -> tuple[list[Vector], int | None]:
        """One call through the breaker; `chunks`: memory rows left without a vector if it
        fails (0 for a search's query)."""
        if not self.breaker.allow(self._clock()):
            self.unembedded += chunks
            raise EmbeddingError(
                EmbeddingErrorKind.PAUSED,
                f"embedding provider {self.name!r} is paused after failing repeatedly",
            )
        try:
            vectors, tokens = await embed_counted(self.inner, texts)
        except asyncio.CancelledError:
            self.breaker.abandoned()
            raise
        except EmbeddingError as error:
            self._failed(chunks, error.kind.value, error.message)
            raise
        except Exception as exc:  # a provider bug costs vectors, and counts as a failure
            self._failed(chunks, "unexpected", f"{type(exc).__name__}: {exc}")
            raise
        if self.breaker.succeeded() is Change.RECOVERED:
            _log.info(
                "embedding works again",
                fields={"provider": self.name, "chunks_without_vectors": self.unembedded},
            )
        self.unembedded = 0
        return vectors, tokens

    def _failed(self, chunks: int, kind: str, error: str) -> None:
        first = self.breaker.failures == 0
        self.unembedded += chunks
        change = self.breaker.failed(self._clock())
        fields = {"provider": self.name, "chunks": chunks, "kind": kind, "error": error}
        if first:
            _log.warning(
                "embedding failed; chunks kept without vectors until a backfill", fields=fields
            )
        if change is Change.OPENED:
            _log.info(
                "embedding paused after repeated failures",
                fields={
                    "provider": self.name,
                    "failed_batches": self.breaker.failures,
                    "retry_in_s": self.breaker.cooldown_s,
                },
            )
