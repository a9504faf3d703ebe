"""Sessions for the close tests: made through a real choird's agent verbs, or stored directly
for a choird that is not running yet; and what an agent's memory holds, read back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from choir.agent.kernel.commitlog import CommitLog
from choir.daemon.agents.ingest import record_of
from choir.daemon.app import ChoirDaemon
from choir.protocol import TerminateSelfRequest
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import AgentReplied, Event, SessionSummary, UserMsg
from choir.store.agent_schema import run_as_agent
from choir.store.events import insert_events
from choir.store.postgres.pool import Connection, Pool
from tests.e2e.agent_side import heartbeat
from tests.harness.daemons import agent_control_plane, poll_until

TOPICS = (
    "the deploy script pushes the staging build to the blue cluster",
    "postgres backups run nightly and are kept for thirty days",
    "the invoice export job writes a csv for the accounting team",
    "the login form rate limits at five attempts per minute",
)


def conversation(number: int, *, turns: int = 6, summary: bool = True) -> list[Event]:
    """A session's events: user messages and replies about `TOPICS`, its summary at the end."""
    events: list[Event] = []
    for turn in range(turns):
        topic = TOPICS[(number + turn) % len(TOPICS)]
        events.append(UserMsg(text=f"session {number} turn {turn}: tell me how {topic}. " * 8))
        events.append(AgentReplied(text=f"In session {number}: {topic}, as configured. " * 8))
    if summary:
        events.append(SessionSummary(summary=f"Session {number} was about {TOPICS[number % 4]}."))
    return events


async def run_session(
    daemon: ChoirDaemon,
    events: list[Event],
    *,
    end: Literal["stop", "crash"] = "stop",
    agent_id: str = "agent-1",
    dm: str | None = None,
) -> str:
    """A new session of `agent_id` (bound to `dm`; None: the agent's default DM) whose agent
    replicates `events` over its socket and then stops gracefully (TERMINATE_SELF) or is
    declared crashed; its id."""
    assert daemon.services is not None
    overrides = {} if dm is None else {"dm": dm}
    started = await daemon.services.sessions.start(agent_id, overrides, new_session=True)
    plane = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id=agent_id
    )
    try:
        log = CommitLog()
        for event in events:
            log.commit("edge", event)
        await plane.heartbeat(heartbeat(log))
        if end == "stop":
            await plane.terminate_self(TerminateSelfRequest(reason="stop"))
    finally:
        await plane.close()
    if end == "crash":
        await daemon.services.sessions.mark_crashed(started.session_id, "no heartbeat (test)")
    return started.session_id


async def store_ended_session(
    conn: Connection, session_id: str, events: list[Event], agent_id: str = "agent-1"
) -> None:
    """A stopped session with its events, as a choird that has since gone stored it."""
    await conn.execute(
        "INSERT INTO choir_control.agents (agent_id, name) VALUES ($1, $1) ON CONFLICT DO NOTHING",
        agent_id,
    )
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status, started_at, "
        "ended_at, ack_rev) VALUES ($1, $2, 'stopped', now(), now(), $3)",
        session_id,
        agent_id,
        len(events),
    )
    rows, previous, now = [], GENESIS_HASH, datetime.now(UTC)
    for rev, event in enumerate(events, start=1):
        committed = CommittedEvent.seal(
            rev=rev, lane="edge", ts=now, hash_prev=previous, event=event
        )
        rows.append(record_of(committed))
        previous = committed.hash
    await insert_events(conn, session_id, rows)


@dataclass(frozen=True)
class Row:
    """One stored chunk, as the close tests compare them."""

    id: str
    session_id: str
    tier: str
    index: int
    text: str
    vector: bool
    dims: int | None


async def memory_rows(pool: Pool, agent_id: str = "agent-1") -> list[Row]:
    """Every chunk of the agent's session memory, with whether it has a vector."""
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        rows = await agent.fetch(
            "SELECT d.id::text, d.session_id, d.tier, d.chunk_index, d.text, "
            "e.document_id IS NOT NULL AS vector, vector_dims(e.embedding) AS dims "
            "FROM memory_documents d LEFT JOIN memory_embeddings e ON e.document_id = d.id "
            "ORDER BY d.session_id, d.tier, d.chunk_index"
        )
    return [Row(*row.values()) for row in rows]


async def close_state(pool: Pool, session_id: str) -> str | None:
    """`closing`, `closed`, or None (no close began)."""
    async with pool.acquire() as conn:
        state: str | None = await conn.fetchval(
            "SELECT state FROM choir_control.memory_closes WHERE session_id = $1", session_id
        )
    return state


async def wait_closed(pool: Pool, *session_ids: str, within: float = 30.0) -> None:
    async def closed() -> bool:
        try:
            return all([await close_state(pool, s) == "closed" for s in session_ids])
        except Exception:  # the server restarts (any connection error): ask again
            return False  # the server restarts: ask again

    await poll_until(closed, within=within, every=0.05)
