"""Vectors for memory rows: queued for the embedding service, written back per agent (§11.9).

    index = MemoryIndex(store, service, agents=lambda: config.agents)
    index.index("ada", "knowledge", item.id, item.text)   # never waits, never raises
    await index.settled()                                 # (tests, the bench) all written
    await index.backfill("ada")                           # rows stored without a vector

A row's text goes to the service's queue under a chunk id that names its agent, target and row
(`knowledge/ada/<uuid>`), so each batch's results are grouped by (agent, target) into one
`set_vectors` each. A row whose embedding fails keeps no vector: it is found by text, and a
backfill gives it one later — at choird's start, when the embedder works again after an outage
(a batch with vectors delivered after batches without), and on a timer while rows wait (`RETRY_S`:
an idle choird has no batch to notice the recovery with). Rows deleted or promoted meanwhile are
skipped by the store, never an error. An agent whose stored vectors are another model's
(`vector_models`: the embedding model changed) gets no vector and no backfill until its
`memory reembed` switches it; `backfill` runs one at a time per agent, so a re-embed and a
retry never embed a row twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Final
from uuid import UUID

from choir.daemon.memory.embedding.chunk_ids import chunk_id, parse_chunk_id
from choir.logs import get_logger
from choir.store.memory.vectors import VectorTarget

if TYPE_CHECKING:
    from choir.daemon.memory.embedding.provider import Vector
    from choir.daemon.memory.embedding.queue import EmbeddingResult
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.store import MemoryStore

_log = get_logger("choir.memory")

BACKFILL_PAGE: Final = 512
"""Rows a backfill reads and queues at a time (16 batches of 32)."""
WRITE_TIMEOUT_S: Final = 5.0
"""At shutdown, how long delivered vectors may take to be stored."""
WRITE_BATCH: Final = 512
"""Vectors written per statement at most (results gathered while the previous write ran)."""
WRITERS: Final = 2
"""Writers storing vectors at once, each on its own connection. Inserting into the HNSW index is
most of a session close's Postgres work (~1.6 s of CPU for a 10k-event session): two writers
spread it over two cores. A row always goes to the same writer (`_lane`), so a row queued twice
(a knowledge item edited) gets its vectors stored in the queue's order, its latest last."""
SMALL_WRITE: Final = 64
"""A write of fewer vectors (a compaction's archive, one knowledge item: a few ms of Postgres'
CPU) waits for the other writer's small write instead of running beside it: two at once would
hold two pooled connections, and a connection opened for that is a Postgres backend of ~15-20 MB
kept until it idles. Larger writes (a session's close, a backfill) still run two at once."""
RETRY_S: Final = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0)
"""After rows went without vectors, when a backfill tries again (the last repeats) unless a
batch with vectors comes first: an idle choird still notices the embedder is back."""


def _lane(chunk_id: str) -> int:
    """The writer of a chunk's vectors: always the same one for the same row."""
    return hash(chunk_id) % WRITERS


class MemoryIndex:
    """Gives memory rows their vectors; owns one feeder task and at most one backfill task."""

    def __init__(
        self,
        store: MemoryStore,
        service: MemoryService,
        *,
        agents: Callable[[], Collection[str]] = tuple,
        current: Callable[[str], bool] = lambda agent_id: True,
        page: int = BACKFILL_PAGE,
        retry_s: tuple[float, ...] = RETRY_S,
    ) -> None:
        self._store = store
        self._service = service
        self._agents = agents
        self._current = current
        """Whether an agent's stored vectors are the configured model's: a stale agent's rows
        wait for its re-embed (`memory reembed`) instead of being embedded next to them."""
        self._page = page
        self.retry_s = retry_s
        """The waits before a backfill retries rows left without vectors."""
        self._retry: asyncio.TimerHandle | None = None
        self._attempt = 0
        self._waiting: list[tuple[str, str]] = []
        """(chunk id, text) not yet handed to the service."""
        self._outstanding: set[str] = set()
        """Chunk ids queued whose results were not delivered yet."""
        self._settled = asyncio.Event()
        self._settled.set()
        self._feeder: asyncio.Task[None] | None = None
        self._results: list[list[EmbeddingResult]] = [[] for _ in range(WRITERS)]
        """Delivered results each writer has not stored yet."""
        self._writers: list[asyncio.Task[None] | None] = [None] * WRITERS
        self._small_writes = asyncio.Lock()
        """Held by a writer storing fewer than `SMALL_WRITE` vectors."""
        self._backfilling: asyncio.Task[None] | None = None
        self._again = False
        """A backfill was asked for while one ran: run once more after it."""
        self._unembedded = False
        """Rows were delivered without vectors since the last batch with vectors."""
        self._stored: dict[str, int] = defaultdict(int)
        """Vectors written per agent since choird started (a backfill's progress)."""
        self._backfill_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        """One backfill of an agent at a time (a re-embed and a retry would embed rows twice)."""
        self._closed = False
        service.connect(self._deliver)

    # -- queueing ----------------------------------------------------------------------------

    def index(self, agent_id: str, target: VectorTarget, row_id: UUID, text: str) -> None:
        """Queue the row's text for embedding; its vector is stored when it comes (or not)."""
        if self._closed or not self._current(agent_id):
            return
        key = chunk_id(agent_id, target, row_id)
        self._waiting.append((key, text))
        self._outstanding.add(key)
        self._settled.clear()
        if self._feeder is None or self._feeder.done():
            self._feeder = asyncio.get_running_loop().create_task(self._feed(), name="memory-index")

    async def settled(self) -> None:
        """Wait until every row queued so far has its vector stored (or has failed)."""
        await self._settled.wait()

    async def _feed(self) -> None:
        while self._waiting:
            waiting, self._waiting = self._waiting, []
            for key, text in waiting:
                future = await self._service.enqueue(key, text)
                if future.done():  # refused at once (closed, no provider): nothing delivers it
                    self._done([key])
        self._check_settled()

    def _done(self, keys: Sequence[str]) -> None:
        self._outstanding.difference_update(keys)
        self._check_settled()

    def _check_settled(self) -> None:
        if not self._outstanding and not self._waiting:
            self._settled.set()

    # -- results -----------------------------------------------------------------------------

    async def _deliver(self, results: Sequence[EmbeddingResult]) -> None:
        """The service's sink: results wait for the writer, so embedding the next batch
        overlaps Postgres storing (and indexing) this one's vectors."""
        for result in results:
            self._results[_lane(result.chunk_id)].append(result)
        for lane, waiting in enumerate(self._results):
            writer = self._writers[lane]
            if waiting and (writer is None or writer.done()):
                self._writers[lane] = asyncio.get_running_loop().create_task(
                    self._write_loop(lane), name=f"memory-vectors-{lane}"
                )

    async def _write_loop(self, lane: int) -> None:
        while self._results[lane]:
            if len(self._results[lane]) >= SMALL_WRITE:
                await self._write(self._take(lane))
                continue
            async with self._small_writes:
                await self._write(self._take(lane))  # with what gathered while it waited

    def _take(self, lane: int) -> list[EmbeddingResult]:
        waiting = self._results[lane]
        self._results[lane] = waiting[WRITE_BATCH:]
        return waiting[:WRITE_BATCH]

    async def _write(self, results: Sequence[EmbeddingResult]) -> None:
        """One `set_vectors` per (agent, target) of the results."""
        groups: dict[tuple[str, VectorTarget], list[tuple[UUID, Vector]]] = defaultdict(list)
        missing = 0
        for result in results:
            parsed = parse_chunk_id(result.chunk_id)
            if parsed is None:
                continue
            agent_id, target, row = parsed
            if result.vector is None:
                missing += 1
            else:
                groups[(agent_id, target)].append((row, result.vector))
        try:
            for (agent_id, target), vectors in groups.items():
                try:
                    written = await self._store.set_vectors(agent_id, target, vectors)
                except Exception as exc:  # the rows stay without vectors, for a backfill
                    missing += len(vectors)
                    _log.warning(
                        "memory vectors not stored; a backfill retries them",
                        fields={
                            "agent_id": agent_id,
                            "target": target,
                            "rows": len(vectors),
                            "error": f"{type(exc).__name__}: {exc}",
                        },
                    )
                else:  # added after the write: `+= await` would lose the other writer's count
                    self._stored[agent_id] += written
        finally:
            self._done([result.chunk_id for result in results])
        if missing:
            self._unembedded = True
            self._retry_later()
        elif groups:
            self._attempt = 0
            if self._unembedded:  # the embedder works again: give the skipped rows vectors
                self._unembedded = False
                self._cancel_retry()
                self.backfill_all()

    def _retry_later(self) -> None:
        if self._retry is not None or self._closed:
            return
        wait = self.retry_s[min(self._attempt, len(self.retry_s) - 1)]
        self._attempt += 1
        self._retry = asyncio.get_running_loop().call_later(wait, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.backfill_all()

    def _cancel_retry(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    # -- backfill ----------------------------------------------------------------------------

    def backfill_all(self, after: Callable[[], Awaitable[object]] | None = None) -> None:
        """Backfill every configured agent in the background (one run at a time), once
        `after()` is done if given (`backfilled` waits for that too)."""
        if self._closed:
            return
        if self._backfilling is not None and not self._backfilling.done():
            self._again = True
            return
        self._backfilling = asyncio.get_running_loop().create_task(
            self._backfill_all(after), name="memory-backfill"
        )

    async def _backfill_all(self, after: Callable[[], Awaitable[object]] | None) -> None:
        if after is not None:
            await after()
        while True:
            self._again = False
            for agent_id in [a for a in self._agents() if self._current(a)]:
                try:
                    await self.backfill(agent_id)
                except Exception as exc:  # the next start (or recovery) tries again
                    _log.warning(
                        "memory backfill stopped",
                        fields={"agent_id": agent_id, "error": f"{type(exc).__name__}: {exc}"},
                    )
            if not self._again:
                return

    async def backfilled(self) -> None:
        """Wait for the backfill running now (if any) to end."""
        while self._backfilling is not None and not self._backfilling.done():
            await asyncio.shield(self._backfilling)

    async def backfill(
        self, agent_id: str, progress: Callable[[int, int], Awaitable[None]] | None = None
    ) -> int:
        """Embed the agent's rows that have no vector, a page at a time; how many got one.
        Stops early when a page gets no vector at all (the embedder is down: its recovery
        starts another backfill). `progress(done, total)` is awaited after each page. One
        backfill of an agent runs at a time: a second waits, then finds what is left."""
        async with self._backfill_locks[agent_id]:
            return await self._backfill(agent_id, progress)

    async def _backfill(
        self, agent_id: str, progress: Callable[[int, int], Awaitable[None]] | None
    ) -> int:
        total = (await self._store.stats(agent_id)).vectors_missing
        if total == 0:
            return 0
        _log.info(
            f"memory: backfilling {total} vectors for {agent_id}",
            fields={"agent_id": agent_id, "missing": total},
        )
        done = 0
        tried: set[UUID] = set()
        while True:
            rows = [
                row
                for row in await self._store.missing_vectors(agent_id, limit=self._page)
                if row.id not in tried
            ]
            if not rows:
                break
            before = self._stored[agent_id]
            for row in rows:
                tried.add(row.id)
                self.index(agent_id, row.target, row.id, row.text)
            await self.settled()
            embedded = self._stored[agent_id] - before
            done += embedded
            total = max(total, done)  # rows stored meanwhile are embedded too
            _log.info(
                f"memory: {done}/{total} vectors for {agent_id}",
                fields={"agent_id": agent_id, "embedded": done, "missing": total},
            )
            if progress is not None:
                await progress(done, total)
            if embedded == 0:
                _log.info(
                    "memory backfill paused: no vectors came back; it is retried later",
                    fields={"agent_id": agent_id, "tried": len(tried)},
                )
                break
        return done

    # -- shutdown ----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop queueing and backfilling (what is missing is backfilled at the next start);
        vectors the service still delivers are stored until `aclose`."""
        self._closed = True
        self._cancel_retry()
        for task in (self._backfilling, self._feeder):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._waiting.clear()

    async def aclose(self, timeout_s: float = WRITE_TIMEOUT_S) -> None:
        """Stop, then store the vectors delivered so far for at most `timeout_s` (after the
        service drained its queue into them); the rest are backfilled at the next start."""
        await self.stop()
        writers = [w for w in self._writers if w is not None and not w.done()]
        if writers:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(asyncio.gather(*writers))
            for writer in writers:
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await writer
        for waiting in self._results:
            waiting.clear()
        self._outstanding.clear()
        self._settled.set()
