"""`choir.store.usage`: one row per `llm_call` event, stored once; sums that never count an
unknown cost as 0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from choir.store.agents import ensure_agent
from choir.store.events import EventRecord
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection
from choir.store.usage import UsageFilter, has_calls, insert_usage, spent, usage_report, usage_rows
from tests.store.records import fake_hash

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def call(
    rev: int, *, cost: float | None, at: datetime = NOW, job: str | None = None
) -> EventRecord:
    return EventRecord(
        rev=rev,
        event_type="llm_call",
        lane=f"core:{job}" if job else "edge",
        payload={
            "kind": "llm_call",
            "lane": f"core:{job}" if job else "edge",
            "job_id": job,
            "purpose": "step",
            "model": "sonnet",
            "provider_model": "anthropic/claude-sonnet-4",
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "cached_tokens": 40,
            "latency_ms": 900,
            "cost_usd": cost,
            "cost_source": None if cost is None else "price",
        },
        hash_prev=fake_hash(rev - 1),
        hash=fake_hash(rev),
        created_at=at,
    )


async def session(conn: Connection, agent_id: str, session_id: str) -> None:
    await apply_control_schema(conn)
    await ensure_agent(conn, agent_id)
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ($1, $2, 'active')",
        session_id,
        agent_id,
    )


async def test_rows_are_stored_once_and_summed_without_unknown_costs(
    conn: Connection, agent_ids: tuple[str, str]
) -> None:
    agent, _ = agent_ids
    await session(conn, agent, "s-1")
    yesterday = NOW - timedelta(days=1)
    records = [
        call(1, cost=0.01),
        call(2, cost=None),
        call(3, cost=0.02, job="j-1"),
        call(4, cost=0.5, at=yesterday),
        EventRecord(5, "user_msg", "edge", {"kind": "user_msg"}, fake_hash(4), fake_hash(5), NOW),
    ]
    rows = usage_rows(records)
    assert len(rows) == 4
    await insert_usage(conn, agent, "s-1", rows)
    await insert_usage(conn, agent, "s-1", rows)  # a resent heartbeat: nothing twice

    day = NOW.replace(hour=0)
    known = await spent(conn, agent, day, day.replace(day=1))
    assert (round(known.day_usd, 6), round(known.month_usd, 6), known.unknown_cost_calls) == (
        0.03,
        0.53,
        1,
    )
    [today, earlier] = sorted(
        await usage_report(conn, "day", UsageFilter(agent)), key=lambda r: r["key"], reverse=True
    )
    assert (today["key"], today["calls"], today["unknown_cost_calls"]) == ("2026-11-27", 3, 1)
    assert round(today["cost_usd"], 6) == 0.03
    assert (today["prompt_tokens"], today["cached_tokens"]) == (300, 120)
    assert earlier["key"] == "2026-11-26"
    by_job = await usage_report(conn, "job", UsageFilter(agent, since=day))
    assert {r["key"]: r["cost_usd"] for r in by_job} == {"edge": 0.01, "j-1": 0.02}
    assert await has_calls(conn, agent_id=agent)
    assert await has_calls(conn, model="sonnet")
    assert not await has_calls(conn, model="gpt-9")


async def test_a_group_whose_costs_are_all_unknown_sums_to_null_not_zero(
    conn: Connection, agent_ids: tuple[str, str]
) -> None:
    agent, _ = agent_ids
    await session(conn, agent, "s-2")
    await insert_usage(conn, agent, "s-2", usage_rows([call(1, cost=None)]))
    [row] = await usage_report(conn, "model", UsageFilter(agent))
    assert (row["cost_usd"], row["unknown_cost_calls"]) == (None, 1)
