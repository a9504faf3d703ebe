"""`memory reembed`: give an agent's memory the vectors of the configured embedding model (§11.9).

    done = await reembedder.run("ada", missing_only=False, progress=report)

A model or dimensions change is a migration, run by the operator once choird restarted on the
new model (until then the agent is stale, searched by text: `vector_models`):

1. the embedder is asked for one vector first — when none comes (endpoint down, breaker open)
   the run is refused and nothing is changed;
2. `switch_embedding_model` drops the old vectors, re-dimensions the columns and records the
   configured model, in one transaction;
3. the rows without a vector are embedded a page at a time (`MemoryIndex.backfill`), progress
   reported after each page.

Text search works throughout; semantic search sees only the new model's vectors (the old ones
went in step 2). A run stopped midway (choird killed, the embedder gone) has the new model
recorded and its finished pages stored: the next run, or choird's start-up backfill, embeds
only the rows still without a vector. `missing_only` (`--missing`) is step 3 alone: the rows an
outage left without vectors, refused for a stale agent (it would mix models).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from choir.errors import ConflictError, UnavailableError, UsageError
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.store.memory.embedding_model import EmbeddingModel, switch_embedding_model
from choir.store.postgres.pool import Pool

if TYPE_CHECKING:
    from choir.daemon.memory.embedding.index import MemoryIndex
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.embedding.vector_models import VectorModels
    from choir.daemon.memory.store import MemoryStore

_log = get_logger("choir.memory")

PROBE_TEXT: Final = "choir memory re-embed: is the embedder answering?"
PROBE_TIMEOUT_S: Final = 30.0
"""How long the first vector may take (the local model loads its weights for it)."""

Progress = Callable[[int, int], Awaitable[None]]
"""`(embedded, total)` after each page."""


@dataclass(frozen=True, slots=True)
class Reembedded:
    """One agent's run."""

    agent_id: str
    model: EmbeddingModel
    previous: EmbeddingModel
    """The model of its vectors before the run (== model: only missing rows were embedded)."""
    embedded: int


class Reembedder:
    """Runs re-embeds, at most one per agent at a time."""

    def __init__(
        self,
        pool: Pool,
        store: MemoryStore,
        service: MemoryService,
        index: MemoryIndex,
        models: VectorModels,
    ) -> None:
        self._pool = pool
        self._store = store
        self._service = service
        self._index = index
        self._models = models
        self._running: set[str] = set()

    async def run(
        self, agent_id: str, *, missing_only: bool, progress: Progress | None = None
    ) -> Reembedded:
        """Re-embed `agent_id`'s memory with the configured model (only its rows without a
        vector when `missing_only`). Refused: a run of the agent already going, `missing_only`
        for a stale agent, no embedder answering."""
        if agent_id in self._running:
            raise ConflictError(
                f"a re-embed of agent {agent_id} is already running; wait for it to finish "
                f"(choirctl memory stats {agent_id} shows the vectors still missing)"
            )
        self._running.add(agent_id)
        try:
            return await self._run(agent_id, missing_only, progress)
        finally:
            self._running.discard(agent_id)

    async def _run(
        self, agent_id: str, missing_only: bool, progress: Progress | None
    ) -> Reembedded:
        model, previous = self._models.configured, self._models.stored(agent_id)
        if missing_only and previous != model:
            raise UsageError(
                f"agent {agent_id}'s vectors are of {previous}, not the configured {model}: "
                f"re-embed them all with `choirctl memory reembed {agent_id}` (without --missing)"
            )
        await self._probe()
        if previous != model:
            async with self._pool.acquire() as conn:
                await switch_embedding_model(conn, agent_id, model)
            self._models.record(agent_id, model)
            _log.info(
                f"memory: re-embedding {agent_id} with {model} (was {previous})",
                fields={"agent_id": agent_id, "model": model.name, "dims": model.dims},
            )

        async def page_done(done: int, total: int) -> None:
            if progress is not None:
                await progress(done, total)
            await failpoint("memory.reembed.after_page")

        embedded = await self._index.backfill(agent_id, page_done)
        missing = (await self._store.stats(agent_id)).vectors_missing
        if missing:
            raise UnavailableError(
                f"the embedder stopped answering: {embedded} vectors stored for {agent_id}, "
                f"{missing} rows still without one; run the command again to resume"
            )
        return Reembedded(agent_id, model, previous, embedded)

    async def _probe(self) -> None:
        """One vector from the embedder, or the refusal naming why none came."""
        if self._service.paused:
            raise UnavailableError(
                f"no embedder answers ({self._service.provider_name}: it failed repeatedly and "
                "its circuit breaker pauses it); nothing was changed: check embedding.endpoint "
                "and its key (choirctl logs), then run the command again"
            )
        vector = await self._service.embed_query(PROBE_TEXT, timeout_s=PROBE_TIMEOUT_S)
        if vector is None:
            raise UnavailableError(
                f"no embedder answers ({self._service.provider_name}); nothing was changed: "
                "check embedding.endpoint and its key (choirctl logs), then run the command again"
            )
