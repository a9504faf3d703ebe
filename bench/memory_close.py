"""Session close figures of `bench.memory`: a 10k-event session put into memory.

An embedded Postgres (choird's own server settings) holds a stopped session of 10,000 events —
turns of a question, three file reads with their results, an answer — and one agent's schema.
choird's own pieces then close it: `SessionCloser.close_one` reads the events back in pages,
chunks them (in a worker thread), stores the mid-term chunks, and `MemoryIndex` embeds them with
the local model (loaded beforehand, as a running choird has it) and stores the vectors.

- session_close_10k_events_s: wall clock from the close's start until every chunk has its vector
  stored (the goal's figure; Postgres works in its own processes meanwhile).
- session_close_10k_events_cpu_s: CPU time over the same span of choird's side (this process,
  its threads included) and of Postgres (its server processes: storing, and HNSW-indexing each
  vector, is most of the work): the figure that holds on a loaded machine.
- session_close_10k_postgres_cpu_s: the Postgres part of it.
- session_close_10k_chunks: how many chunks the session became.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import psutil

from choir.config.resources import EmbeddingConfig
from choir.daemon.agents.ingest import record_of
from choir.daemon.memory.closing.close import SessionCloser
from choir.daemon.memory.embedding.index import MemoryIndex
from choir.daemon.memory.embedding.local_provider import DIMENSIONS
from choir.daemon.memory.embedding.service import EmbeddingSource, MemoryService
from choir.daemon.memory.store import PostgresMemoryStore
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import (
    AgentReplied,
    Event,
    ModelOutput,
    ToolCall,
    ToolCallRequested,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult
from choir.store.agent_schema import ensure_agent_schema
from choir.store.events import insert_events
from choir.store.memory.closes import PendingClose
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, open_pool

AGENT: Final = "bench"
SESSION: Final = "s-bench-close"
INSERT_PAGE: Final = 1_000
VOCABULARY: Final = (
    *("deploy", "server", "port", "config", "build", "test", "file", "read", "fix", "parser"),
    *("cache", "schema", "invoice", "export", "login", "form", "retry", "loop", "migration"),
    *("queue", "index", "settings", "release", "budget", "meeting"),
)


@dataclass(frozen=True)
class Settings:
    """The config a close reads (`CloseSettings`): choir's defaults."""

    agents: tuple[str, ...] = (AGENT,)
    memory_chunk_chars: int = 2_000
    mid_term_sessions: int = 10


def session_events(size: int, seed: int = 11) -> list[Event]:
    """A realistic long session: turns of a question, three file reads, an answer."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(VOCABULARY) for _ in range(n))

    events: list[Event] = []
    while len(events) < size:
        events.append(UserMsg(text=text(20)))
        for k in range(3):
            call_id = f"c{len(events)}-{k}"
            call = ToolCall(id=call_id, name="choir.fs.read", arguments={"path": text(3)})
            events.append(ModelOutput(lane="edge", text=text(10), tool_calls=[call], model="m"))
            events.append(ToolCallRequested(call_id=call_id, tool="choir.fs.read"))
            result = ToolResult.ok(text(8), content=text(200))
            events.append(ToolResultCommitted(call_id=call_id, tool="choir.fs.read", result=result))
        answer = text(40)
        events += [ModelOutput(lane="edge", text=answer, model="m"), AgentReplied(text=answer)]
    return events[:size]


async def _store_session(pool: Pool, events: list[Event]) -> None:
    async with pool.acquire() as conn:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, DIMENSIONS)
        await conn.execute(
            "INSERT INTO choir_control.agents (agent_id, name) VALUES ($1, $1)", AGENT
        )
        await conn.execute(
            "INSERT INTO choir_control.sessions (session_id, agent_id, status, ack_rev) "
            "VALUES ($1, $2, 'stopped', $3)",
            SESSION,
            AGENT,
            len(events),
        )
        rows, previous, now = [], GENESIS_HASH, datetime.now(UTC)
        for rev, event in enumerate(events, start=1):
            committed = CommittedEvent.seal(
                rev=rev, lane="edge", ts=now, hash_prev=previous, event=event
            )
            rows.append(record_of(committed))
            previous = committed.hash
        for start in range(0, len(rows), INSERT_PAGE):
            await insert_events(conn, SESSION, rows[start : start + INSERT_PAGE])


def _cpu(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster, its live backends and those that exited."""
    main = psutil.Process(postmaster)
    times = main.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in main.children(recursive=True):
        try:
            spent = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += spent.user + spent.system
    return total


async def close_figures(size: int = 10_000) -> dict[str, float]:
    """Store a session of `size` events, then time its close (chunks, vectors and all)."""
    events = session_events(size)
    root = Path(tempfile.mkdtemp(prefix="choir-bench-close-"))
    try:
        server = EmbeddedPostgres(root / "pgdata")
        server.start()
        server.stop()  # the first start only creates the cluster: start again with choir.conf
        async with server, open_pool(server.params, min_size=1, max_size=4) as pool:
            await _store_session(pool, events)
            store = PostgresMemoryStore(pool)
            async with MemoryService(lambda: EmbeddingSource(EmbeddingConfig())) as service:
                index = MemoryIndex(store, service)
                await service.embed_query("warm up", timeout_s=60)  # the model, loaded once
                closer = SessionCloser(pool, store, index, Settings)
                assert server.pid is not None
                wall, cpu, pg = time.perf_counter(), time.process_time(), _cpu(server.pid)
                chunks = await closer.close_one(PendingClose(SESSION, AGENT, len(events)))
                await index.settled()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                pg = _cpu(server.pid) - pg
                missing = (await store.stats(AGENT)).vectors_missing
                await index.aclose()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert missing == 0, f"{missing} chunks were left without a vector"
    return {
        "session_close_10k_events_s": wall,
        "session_close_10k_events_cpu_s": cpu + pg,
        "session_close_10k_postgres_cpu_s": pg,
        "session_close_10k_chunks": float(chunks),
    }
