"""choird's embedding calls as usage rows (issue 19): one row per agent per call, with its cost.

The embedding queue sends batches that mix agents' memory rows; each agent is billed its share
(`share`): its texts and characters, and the provider's token count split by characters (the
local model reports none). The cost is `embedding.price` at the call (per million tokens); with
no price it is unknown — never 0 — except the local model's, which costs nothing (`cost_price`).

Rows are kept and written in the background, one INSERT per `FLUSH_S` at most while calls come
(an idle choird writes nothing), so embedding never waits on Postgres; rows still waiting when
choird stops are written by `aclose`. A failed write is logged and its rows dropped: usage is a
record, never a reason to stop embedding. Subscribers (the metrics endpoint) see each call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final, Literal

from choir.config.resources import EmbeddingPrice
from choir.core.spend import PER_MILLION
from choir.daemon.memory.embedding.chunk_ids import owner_of
from choir.logs import get_logger
from choir.store.postgres.pool import Pool
from choir.store.usage import EmbeddingCall, insert_embedding_usage

_log = get_logger("choir.memory.usage")

FLUSH_S: Final = 1.0
"""The longest a call's row waits to be written."""

Purpose = Literal["index", "query"]
Listener = Callable[[EmbeddingCall], None]


def share(
    owners: Sequence[str | None], texts: Sequence[str], tokens: int | None
) -> dict[str, tuple[int, int, int | None]]:
    """Each agent's (texts, characters, tokens) of one call (pure). Texts of no agent are left
    out; `tokens` (None: unknown) is split by characters, what rounding leaves over going to
    the agent with the most, so the agents of a call are charged all it billed for them."""
    texts_of: dict[str, int] = {}
    characters_of: dict[str, int] = {}
    for owner, text in zip(owners, texts, strict=True):
        if owner is not None:
            texts_of[owner] = texts_of.get(owner, 0) + 1
            characters_of[owner] = characters_of.get(owner, 0) + len(text)
    if tokens is None:
        return {o: (texts_of[o], characters_of[o], None) for o in texts_of}
    total = sum(len(text) for text in texts) or 1
    owned = sum(characters_of.values())
    tokens_of = {o: tokens * characters_of[o] // total for o in texts_of}
    if tokens_of:
        largest = max(tokens_of, key=lambda o: characters_of[o])
        tokens_of[largest] += tokens * owned // total - sum(tokens_of.values())
    return {o: (texts_of[o], characters_of[o], tokens_of[o]) for o in texts_of}


def embedding_cost(price: EmbeddingPrice | None, tokens: int | None) -> float | None:
    """USD of `tokens` at `price`; None when unknown (no price, or tokens unknown at a price
    that is not 0)."""
    if price is None:
        return None
    if price.tokens == 0:
        return 0.0
    return None if tokens is None else tokens * price.tokens / PER_MILLION


class EmbeddingMeter:
    """Records embedding calls; an async context manager only in spirit: call `aclose`."""

    def __init__(
        self,
        pool: Callable[[], Pool | None],
        price: Callable[[], EmbeddingPrice | None],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        flush_s: float = FLUSH_S,
    ) -> None:
        self._pool = pool
        self._price = price
        self._clock = clock
        self._flush_s = flush_s
        self._pending: list[EmbeddingCall] = []
        self._writer: asyncio.Task[None] | None = None
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Tell `listener` of every call recorded from now on; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def indexed(
        self,
        chunk_ids: Sequence[str],
        texts: Sequence[str],
        *,
        model: str,
        latency_ms: int,
        tokens: int | None,
    ) -> None:
        """A call of the embedding queue: memory rows, each its agent's (`index.chunk_id`)."""
        owners = [owner_of(chunk) for chunk in chunk_ids]
        self.embedded(
            owners, texts, model=model, purpose="index", latency_ms=latency_ms, tokens=tokens
        )

    def embedded(
        self,
        owners: Sequence[str | None],
        texts: Sequence[str],
        *,
        model: str,
        purpose: Purpose,
        latency_ms: int,
        tokens: int | None,
    ) -> None:
        """One call answered: `texts`, each of the agent in `owners` (None: no agent's)."""
        price, now = self._price(), self._clock()
        for agent_id, (count, characters, tokens_of) in share(owners, texts, tokens).items():
            call = EmbeddingCall(
                agent_id=agent_id,
                model=model,
                purpose=purpose,
                texts=count,
                characters=characters,
                tokens=tokens_of or 0,
                latency_ms=max(latency_ms, 0),
                cost_usd=embedding_cost(price, tokens_of),
                called_at=now,
            )
            self._pending.append(call)
            for listener in list(self._listeners):
                with contextlib.suppress(Exception):  # a listener must never stop embedding
                    listener(call)
        if self._pending and (self._writer is None or self._writer.done()):
            self._writer = asyncio.get_running_loop().create_task(
                self._write_soon(), name="embedding-usage"
            )

    async def _write_soon(self) -> None:
        await asyncio.sleep(self._flush_s)
        await self.flush()

    async def flush(self) -> None:
        """Write the rows waiting now."""
        rows, self._pending = self._pending, []
        pool = self._pool()
        if not rows or pool is None:
            return
        try:
            async with pool.acquire() as conn:
                await insert_embedding_usage(conn, rows)
        except Exception as exc:  # a record lost, never embedding stopped
            _log.warning(
                "embedding usage not stored",
                fields={"calls": len(rows), "error": f"{type(exc).__name__}: {exc}"},
            )

    async def aclose(self) -> None:
        """Write what waits; no timer is left running."""
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.flush()


__all__ = ["FLUSH_S", "EmbeddingMeter", "embedding_cost", "share"]
