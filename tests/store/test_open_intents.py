"""`open_intents` finds what folding the whole log finds, on real Postgres: random logs of
every shape (`intent_logs`), without a snapshot, with the agent's snapshots along the way (the
latest bounds what is read), and with snapshots that cannot bound anything. So does
`session.recover`'s read of the interrupted calls, which reads the log's rows after the latest
snapshot, not all of them (Postgres's own count of the rows the transaction read)."""

from __future__ import annotations

from typing import Any

import pytest

from choir.daemon.operator.recovery.recover import interrupted_calls
from choir.store.events import EventRecord, insert_events
from choir.store.open_intents import OpenIntent, open_intents
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection
from choir.store.snapshots import save_snapshot
from tests.store.intent_logs import call_log, folded, interrupted, ledger_snapshot, records

SESSION = "s-calls"
ROWS_READ = """
SELECT seq_tup_read + coalesce(idx_tup_fetch, 0)
FROM pg_stat_xact_user_tables
WHERE schemaname = 'choir_control' AND relname = 'session_events'
"""
"""Rows of the log the current transaction has read, by any scan."""


@pytest.fixture
async def session_conn(conn: Connection) -> Connection:
    await apply_control_schema(conn)
    await conn.execute("INSERT INTO choir_control.agents (agent_id, name) VALUES ('a', 'A')")
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ($1, 'a', 'crashed')",
        SESSION,
    )
    return conn


def shown(intents: list[OpenIntent]) -> list[tuple[object, ...]]:
    return [(i.lane, i.call_id, i.tool, i.arguments, i.created_at.isoformat()) for i in intents]


async def stored(conn: Connection, events: list[EventRecord], *, every: int = 0) -> None:
    """`events` in the log, with the agent's snapshot after every `every` of them (0: none)."""
    for start in range(0, len(events), every or len(events)):
        batch = events[start : start + (every or len(events))]
        await insert_events(conn, SESSION, batch)
        if every:
            rev = batch[-1].rev
            await save_snapshot(conn, SESSION, rev, ledger_snapshot(events, rev))


@pytest.mark.parametrize("seed", range(6))
async def test_a_random_log_without_snapshots_has_the_folds_open_intents(
    session_conn: Connection, seed: int
) -> None:
    events = call_log(seed, 1500)
    await stored(session_conn, events)

    found = shown(await open_intents(session_conn, SESSION))

    assert found == folded(events)
    assert found  # the logs do leave calls open, and some with unknown arguments
    assert seed > 2 or any(arguments is None for _, _, _, arguments, _ in folded(events))


@pytest.mark.parametrize(("seed", "every"), [(10, 100), (11, 250), (12, 499), (13, 1000)])
async def test_with_the_agents_snapshots_the_latest_bounds_the_read_and_nothing_changes(
    session_conn: Connection, seed: int, every: int
) -> None:
    events = call_log(seed, 3000)
    await stored(session_conn, events, every=every)

    assert shown(await open_intents(session_conn, SESSION)) == folded(events)

    # a crash between snapshots: the log goes on past the latest one
    more = call_log(seed + 100, 300)
    tail = records([(e.lane, e.event_type, e.payload) for e in events + more])[len(events) :]
    await insert_events(session_conn, SESSION, tail)
    assert shown(await open_intents(session_conn, SESSION)) == folded(events + tail)


async def test_a_call_left_open_long_before_the_snapshot_is_still_found(
    session_conn: Connection,
) -> None:
    intent = {"call_id": "c-old", "tool": "choir.git.push", "side_effect": "exec"}
    proposal = {"lane": "edge", "tool_calls": [{"id": "c-old", "arguments": {"force": True}}]}
    payloads: list[tuple[str, str, dict[str, Any]]] = [
        ("edge", "model_output", proposal),
        ("edge", "tool_call_committed", {**intent, "locks": [], "idempotent": False}),
        *[("edge", "user_message", {"text": f"m{n}"}) for n in range(500)],
    ]
    events = records(payloads)
    await stored(session_conn, events, every=100)

    [found] = await open_intents(session_conn, SESSION)

    assert (found.call_id, found.tool, found.arguments) == (
        "c-old",
        "choir.git.push",
        {"force": True},
    )
    assert shown([found]) == folded(events)


async def test_snapshots_without_open_intents_bound_nothing(session_conn: Connection) -> None:
    events = call_log(20, 800)
    await insert_events(session_conn, SESSION, events)
    await save_snapshot(session_conn, SESSION, 700, {"rev": 700})  # a document without the list

    assert shown(await open_intents(session_conn, SESSION)) == folded(events)
    assert await open_intents(session_conn, "no-such-session") == []


async def crashed_later(conn: Connection, events: list[EventRecord], *, every: int) -> None:
    """`events` stored with the agent's snapshots but for the last 300: a crash between two
    snapshots (the log goes on past the latest one; its calls are the same turns', so no id is
    committed again before its result, as the agent never does)."""
    await stored(conn, events[:-300], every=every)
    await insert_events(conn, SESSION, events[-300:])


@pytest.mark.parametrize(("seed", "every"), [(30, 0), (31, 0), (32, 100), (33, 499), (34, 1000)])
async def test_session_recover_finds_the_calls_folding_the_whole_log_found(
    session_conn: Connection, seed: int, every: int
) -> None:
    events = call_log(seed, 3300)
    await crashed_later(session_conn, events, every=every)

    calls = await interrupted_calls(session_conn, SESSION)

    assert calls == interrupted(events)
    assert {call.job_name for call in calls} == {None, "build", "deploy"}
    assert {call.side_effect for call in calls} == {"external", "write", None}


async def test_session_recover_reads_the_log_after_the_latest_snapshot_not_all_of_it(
    session_conn: Connection,
) -> None:
    events = call_log(40, 6300)
    await crashed_later(session_conn, events, every=1000)
    open_at_snapshot = len(ledger_snapshot(events, 6000)["open_intents"])

    async with session_conn.transaction():
        calls = await interrupted_calls(session_conn, SESSION)
        read = await session_conn.fetchval(ROWS_READ)

    assert calls == interrupted(events)
    # the intents after the snapshot, those open at it, and a result probe for each open call
    assert 0 < read <= 300 + 2 * open_at_snapshot, read
