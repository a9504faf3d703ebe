"""`choir_control.llm_usage`: one row per billed model call — an agent's LLM calls and TTS
calls, choird's embedding calls — and the sums read from it.

An agent's rows come from the events a heartbeat makes durable, in the heartbeat's own
transaction (`choir.daemon.agents.ingest`), keyed by (session_id, rev): a resent heartbeat
stores nothing twice, and an event is counted exactly when it is acknowledged. An LLM call is
its `llm_call` event; a TTS call is the result of its `choir.tts.speak` call, which carries the
characters billed and their cost once the provider answered. choird's embedding calls have
no event: `insert_embedding_usage` stores them with no session. Sums count known costs only and
say how many calls had none: an unknown cost is never summed as 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from choir.core.spend import tts_billed
from choir.store.events import EventRecord
from choir.store.postgres.pool import Connection

LLM_CALL: Final = "llm_call"
"""The event type of an LLM call's row."""
TOOL_RESULT: Final = "tool_result_committed"

Grouping = Literal["day", "model", "agent", "job", "agent_day", "kind"]
Kind = Literal["llm", "embedding", "tts"]

_INSERT: Final = """
INSERT INTO choir_control.llm_usage (
    session_id, rev, agent_id, lane, job_id, purpose, model, provider_model, prompt_tokens,
    completion_tokens, cached_tokens, latency_ms, cost_usd, cost_source, called_at, kind,
    characters
)
SELECT $1, r.rev, $2, r.lane, r.job_id, r.purpose, r.model, r.provider_model, r.prompt_tokens,
    r.completion_tokens, r.cached_tokens, r.latency_ms, r.cost_usd, r.cost_source, r.called_at,
    r.kind, r.characters
FROM jsonb_to_recordset($3::jsonb) AS r (
    rev bigint, lane text, job_id text, purpose text, model text, provider_model text,
    prompt_tokens bigint, completion_tokens bigint, cached_tokens bigint, latency_ms int,
    cost_usd double precision, cost_source text, called_at timestamptz, kind text,
    characters bigint
)
ON CONFLICT (session_id, rev) DO NOTHING
"""

_SPENT: Final = """
SELECT
    coalesce(sum(cost_usd) FILTER (WHERE called_at >= $2), 0) AS day_usd,
    coalesce(sum(cost_usd), 0) AS month_usd,
    count(*) FILTER (WHERE cost_usd IS NULL) AS unknown_cost_calls
FROM choir_control.llm_usage
WHERE agent_id = $1 AND called_at >= $3
"""

_KEYS: Final[dict[Grouping, str]] = {
    "day": "to_char(called_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    "model": "model",
    "agent": "agent_id",
    "job": "coalesce(job_id, lane, kind)",
    "agent_day": "agent_id || ' ' || to_char(called_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
    "kind": "kind",
}
"""What each `--by` groups on; a job's key is its id, edge's calls group as `edge`, choird's
embedding calls (no lane) as `embedding`."""


def usage_rows(records: Sequence[EventRecord]) -> list[dict[str, Any]]:
    """The usage rows among `records`: `llm_call` events and billed TTS results."""
    rows = []
    for record in records:
        if record.event_type == LLM_CALL:
            rows.append(_row(record))
        elif record.event_type == TOOL_RESULT and (tts := _tts_row(record)) is not None:
            rows.append(tts)
    return rows


def _row(record: EventRecord) -> dict[str, Any]:
    payload = record.payload
    fields = (
        "job_id",
        "model",
        "provider_model",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "latency_ms",
        "cost_usd",
        "cost_source",
    )
    row = {name: payload.get(name) for name in fields}
    row.update(
        rev=record.rev,
        lane=record.lane,
        purpose=payload.get("purpose", "step"),
        called_at=record.created_at.isoformat(),
        kind="llm",
        characters=0,
    )
    for count in ("prompt_tokens", "completion_tokens", "cached_tokens", "latency_ms"):
        row[count] = row[count] or 0
    return row


def _tts_row(record: EventRecord) -> dict[str, Any] | None:
    """The row of a `choir.tts.speak` result the provider answered (`tts_billed`)."""
    payload = record.payload
    billed = tts_billed({"kind": TOOL_RESULT, **payload})
    if billed is None:
        return None
    return {
        "rev": record.rev,
        "lane": record.lane,
        "job_id": None,
        "purpose": "speech",
        "model": billed.model_id,
        "provider_model": None,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "latency_ms": max(int(payload.get("duration_ms") or 0), 0),
        "cost_usd": billed.cost.usd,
        "cost_source": billed.cost.source,
        "called_at": record.created_at.isoformat(),
        "kind": "tts",
        "characters": billed.characters,
    }


async def insert_usage(
    conn: Connection, agent_id: str, session_id: str, rows: Sequence[dict[str, Any]]
) -> None:
    """Store `rows` (from `usage_rows`); those already stored are skipped."""
    if rows:
        await conn.execute(_INSERT, session_id, agent_id, list(rows))


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """choird's embedding of one agent's texts (its share of a batch)."""

    agent_id: str
    model: str
    """`local`, or the embedding model's id."""
    purpose: Literal["index", "query"]
    """`index`: memory rows given vectors; `query`: a memory search's query."""
    texts: int
    characters: int
    tokens: int
    """Input tokens (the provider's count when it gives one, shared by characters; else the
    local tokenizer's); 0 when unknown."""
    latency_ms: int
    cost_usd: float | None
    """None: unknown (no `embedding.price`)."""
    called_at: datetime


_INSERT_EMBEDDING: Final = """
INSERT INTO choir_control.llm_usage (
    agent_id, purpose, model, prompt_tokens, completion_tokens, cached_tokens, latency_ms,
    cost_usd, cost_source, called_at, kind, characters
)
SELECT r.agent_id, r.purpose, r.model, r.tokens, 0, 0, r.latency_ms, r.cost_usd,
    CASE WHEN r.cost_usd IS NULL THEN NULL ELSE 'price' END, r.called_at, 'embedding',
    r.characters
FROM jsonb_to_recordset($1::jsonb) AS r (
    agent_id text, purpose text, model text, tokens bigint, latency_ms int,
    cost_usd double precision, called_at timestamptz, characters bigint
)
"""


async def insert_embedding_usage(conn: Connection, calls: Sequence[EmbeddingCall]) -> None:
    """Store choird's embedding calls (no session: each call is a row of its own)."""
    if calls:
        rows = [
            {
                "agent_id": c.agent_id,
                "purpose": c.purpose,
                "model": c.model,
                "tokens": c.tokens,
                "latency_ms": c.latency_ms,
                "cost_usd": c.cost_usd,
                "called_at": c.called_at.isoformat(),
                "characters": c.characters,
            }
            for c in calls
        ]
        await conn.execute(_INSERT_EMBEDDING, rows)


@dataclass(frozen=True, slots=True)
class Spent:
    """An agent's known spend in a day and in its month (USD)."""

    day_usd: float
    month_usd: float
    unknown_cost_calls: int
    """Calls in the month whose cost is unknown: not in the sums."""


async def spent(
    conn: Connection, agent_id: str, day_start: datetime, month_start: datetime
) -> Spent:
    """The agent's known spend since `day_start` and since `month_start`."""
    row = await conn.fetchrow(_SPENT, agent_id, day_start, month_start)
    assert row is not None  # an aggregate always yields one row
    return Spent(float(row["day_usd"]), float(row["month_usd"]), row["unknown_cost_calls"])


@dataclass(frozen=True, slots=True)
class UsageFilter:
    """Which calls a report covers."""

    agent_id: str | None = None
    model: str | None = None
    since: datetime | None = None
    kind: Kind | None = None


async def usage_report(
    conn: Connection, by: Grouping, where: UsageFilter, limit: int = 1000
) -> list[dict[str, Any]]:
    """One row per group: calls, token sums, latency, known cost and calls of unknown cost;
    by day in time order, otherwise the costliest first."""
    key = _KEYS[by]
    order = "key" if by in ("day", "agent_day") else "cost_usd DESC NULLS LAST, calls DESC, key"
    sql = f"""
SELECT {key} AS key, count(*) AS calls,
    sum(prompt_tokens)::bigint AS prompt_tokens,
    sum(completion_tokens)::bigint AS completion_tokens,
    sum(cached_tokens)::bigint AS cached_tokens, sum(characters)::bigint AS characters,
    avg(latency_ms)::int AS latency_ms_avg,
    sum(cost_usd) AS cost_usd, count(*) FILTER (WHERE cost_usd IS NULL) AS unknown_cost_calls
FROM choir_control.llm_usage
WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR model = $2)
    AND ($3::timestamptz IS NULL OR called_at >= $3) AND ($5::text IS NULL OR kind = $5)
GROUP BY 1 ORDER BY {order} LIMIT $4
"""  # key and order come from the fixed tables above, never from input
    rows = await conn.fetch(sql, where.agent_id, where.model, where.since, limit, where.kind)
    return [dict(row) for row in rows]


async def top_jobs(conn: Connection, where: UsageFilter, limit: int = 10) -> list[dict[str, Any]]:
    """The costliest core jobs (by known cost, then tokens) with their agent and lane."""
    rows = await conn.fetch(
        """
SELECT agent_id, job_id, min(lane) AS lane, count(*) AS calls,
    sum(prompt_tokens + completion_tokens)::bigint AS tokens, sum(cost_usd) AS cost_usd,
    count(*) FILTER (WHERE cost_usd IS NULL) AS unknown_cost_calls
FROM choir_control.llm_usage
WHERE job_id IS NOT NULL AND ($1::text IS NULL OR agent_id = $1)
    AND ($2::timestamptz IS NULL OR called_at >= $2)
GROUP BY agent_id, job_id ORDER BY cost_usd DESC NULLS LAST, tokens DESC LIMIT $3
""",
        where.agent_id,
        where.since,
        limit,
    )
    return [dict(row) for row in rows]


async def has_calls(
    conn: Connection, *, agent_id: str | None = None, model: str | None = None
) -> bool:
    """Whether any call of `agent_id` (or of `model`) is recorded: an agent or model removed
    from config still has its history reported."""
    found = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM choir_control.llm_usage "
        "WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR model = $2))",
        agent_id,
        model,
    )
    return bool(found)


__all__ = [
    "LLM_CALL",
    "EmbeddingCall",
    "Grouping",
    "Kind",
    "Spent",
    "UsageFilter",
    "has_calls",
    "insert_embedding_usage",
    "insert_usage",
    "spent",
    "top_jobs",
    "usage_report",
    "usage_rows",
]
