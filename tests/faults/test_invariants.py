"""The checker catches what it claims to: each invariant broken on purpose in a real database.

A session log built the way the agent builds one (`CommittedEvent.seal`, so the chain is real)
is stored through choir's own store functions; then one thing is broken per test — a rev
deleted, a payload rewritten, an acknowledged tail dropped, a side effect doubled or run without
its intent, a message doubled or lost after the user saw its reply, a failure never reported.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from choir.protocol import (
    GENESIS_HASH,
    AgentReplied,
    CommittedEvent,
    Event,
    ToolCallCommitted,
    ToolCallRequested,
    ToolResult,
    ToolResultCommitted,
    UserMsg,
)
from choir.store.events import EventRecord, insert_events
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection, connect
from choir.store.postgres.target import ConnectParams
from tests.faults.invariants import InvariantChecker, InvariantViolation
from tests.harness.cluster import EFFECT_TOOL, SentMessage

SESSION = "s-checker"
AGENT = "agent-1"


@dataclass
class Said:
    """A transcript without a live chat: what the user sent and saw."""

    agent_id: str
    sent: list[SentMessage] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)


def turn(token: str, message_id: str, call: str | None = None) -> list[tuple[str, Event]]:
    """A user message answered by one successful `test.effect` call and a reply."""
    call = call or f"call-{token}"
    return [
        ("edge", UserMsg(text=f"please [{token}]", message_id=message_id)),
        ("edge", ToolCallRequested(call_id=call, tool=EFFECT_TOOL, arguments={"token": token})),
        (
            "edge",
            ToolCallCommitted(
                call_id=call, tool=EFFECT_TOOL, side_effect="write", idempotent=False
            ),
        ),
        (
            "edge",
            ToolResultCommitted(
                call_id=call, tool=EFFECT_TOOL, result=ToolResult.ok(f"appended [{token}]")
            ),
        ),
        ("edge", AgentReplied(text=f"done [{token}]", in_reply_to=message_id)),
    ]


def sealed(events: Sequence[tuple[str, Event]]) -> list[EventRecord]:
    """The events as a session log: revs from 1, chained like the agent's commit log."""
    records, previous = [], GENESIS_HASH
    began = datetime(2026, 1, 1, tzinfo=UTC)
    for rev, (lane, event) in enumerate(events, start=1):
        ts = began + timedelta(milliseconds=rev)
        committed = CommittedEvent.seal(rev=rev, lane=lane, ts=ts, hash_prev=previous, event=event)
        payload = committed.model_dump(mode="json")["event"]
        records.append(
            EventRecord(rev, payload["kind"], lane, payload, previous, committed.hash, ts)
        )
        previous = committed.hash
    return records


@pytest.fixture
async def conn(pg_params: ConnectParams) -> AsyncIterator[Connection]:
    connection = await connect(pg_params)
    await apply_control_schema(connection)
    await connection.execute(
        "INSERT INTO choir_control.agents (agent_id, name) VALUES ($1, $1)", AGENT
    )
    try:
        yield connection
    finally:
        await connection.close()


async def store(conn: Connection, records: list[EventRecord], session_id: str = SESSION) -> None:
    """The session and its whole log, all of it acknowledged."""
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status, ack_rev, head_hash) "
        "VALUES ($1, $2, 'crashed', $3, $4)",
        session_id,
        AGENT,
        len(records),
        records[-1].hash,
    )
    await insert_events(conn, session_id, records)


def said(records: list[EventRecord], messages: dict[str, str]) -> Said:
    """The transcript matching `records`: every message sent, every reply seen."""
    sent = [SentMessage(AGENT, text, message_id) for message_id, text in messages.items()]
    replies = [
        {
            "session_id": SESSION,
            "rev": e.rev,
            "category": e.payload["category"],
            "text": e.payload["text"],
            "in_reply_to": e.payload["in_reply_to"],
        }
        for e in records
        if e.event_type == "agent_replied"
    ]
    return Said(AGENT, sent, replies)


def checker(pg_params: ConnectParams, tmp_path: Path, *lines: str) -> InvariantChecker:
    effects = tmp_path / "effects.log"
    effects.write_text("".join(f"{line}\n" for line in lines))
    return InvariantChecker(pg_params, [AGENT], effects=[effects])


TWO_TURNS = [*turn("a", "m-1"), *turn("b", "m-2")]
MESSAGES = {"m-1": "please [a]", "m-2": "please [b]"}


async def problems_of(check: InvariantChecker, transcript: Said) -> list[str]:
    with pytest.raises(InvariantViolation) as caught:
        await check.verify([transcript])
    return caught.value.problems


async def test_a_healthy_log_passes_and_is_described(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(TWO_TURNS)
    await store(conn, records)
    check = checker(pg_params, tmp_path, "a", "b")

    verdict = await check.verify([said(records, MESSAGES)])

    assert [e.rev for e in verdict.sessions[SESSION]] == list(range(1, 11))
    assert verdict.effects == {"a": 1, "b": 1}
    assert verdict.open_intents == []
    assert verdict.lost_messages == []


async def test_call_ids_are_told_apart_by_session(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    await store(conn, sealed(turn("a", "m-1")))
    await store(conn, sealed(turn("b", "m-2", call="call-a")), session_id="s-other")

    verdict = await checker(pg_params, tmp_path, "a", "b").verify()
    problems = await problems_of(checker(pg_params, tmp_path, "a", "b", "b"), Said(AGENT))

    assert sorted(verdict.sessions) == ["s-checker", "s-other"]
    assert verdict.effects == {"a": 1, "b": 1}
    assert problems == ["side effect 'b' ran 2 times"]


async def test_a_gap_and_a_rewritten_event_break_the_chain(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(TWO_TURNS)
    await store(conn, records)
    await conn.execute(
        "DELETE FROM choir_control.session_events WHERE session_id = $1 AND rev = 7", SESSION
    )
    await conn.execute(
        "UPDATE choir_control.session_events SET payload = jsonb_set(payload, '{text}', "
        """'"please [z]"') WHERE session_id = $1 AND rev = 1""",
        SESSION,
    )

    problems = await problems_of(checker(pg_params, tmp_path, "a", "b"), said(records, MESSAGES))

    assert f"{SESSION}[0].hash: does not match the content of rev 1" in problems
    assert f"{SESSION}: ack_rev 10 but only 9 events stored" in problems
    assert f"{SESSION} rev 7" not in "".join(problems)  # not observed: the gap is the chain's


async def test_an_acknowledged_event_lost_later_is_named(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(TWO_TURNS)
    await store(conn, records)
    check = checker(pg_params, tmp_path, "a")
    await check.observe()
    await conn.execute(
        "DELETE FROM choir_control.session_events WHERE session_id = $1 AND rev > 5", SESSION
    )
    await conn.execute(
        "UPDATE choir_control.sessions SET ack_rev = 5, head_hash = $1", records[4].hash
    )

    problems = await problems_of(check, said(records[:5], MESSAGES))

    assert [p for p in problems if "acknowledged, now missing" in p] == [
        f"{SESSION} rev {rev}: acknowledged, now missing" for rev in range(6, 11)
    ]


async def test_a_side_effect_twice_or_without_its_intent_is_caught(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(TWO_TURNS)
    await store(conn, records)

    problems = await problems_of(
        checker(pg_params, tmp_path, "a", "b", "a", "ghost"), said(records, MESSAGES)
    )

    assert problems == [
        "side effect 'a' ran 2 times",
        "side effect 'ghost' ran without a durable intent",
    ]


async def test_a_successful_effect_that_left_no_trace_is_caught(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(TWO_TURNS)
    await store(conn, records)

    problems = await problems_of(checker(pg_params, tmp_path, "a"), said(records, MESSAGES))

    assert problems == ["side effect 'b' succeeded but left no trace"]


async def test_messages_doubled_or_lost_after_a_reply_are_caught(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    doubled = [*turn("a", "m-1"), ("edge", UserMsg(text="please [a]", message_id="m-1"))]
    records = sealed(doubled)
    await store(conn, records)
    transcript = said(records, {**MESSAGES, "m-3": "unanswered"})
    transcript.replies.append(
        {"session_id": SESSION, "rev": 99, "category": "reply", "text": "x", "in_reply_to": "m-2"}
    )

    problems = await problems_of(checker(pg_params, tmp_path, "a"), transcript)

    assert problems == [
        f"{AGENT}: the reply the operator saw at {SESSION} rev 99 is not stored as sent",
        f"{AGENT}: message 'please [a]' stored 2 times",
        f"{AGENT}: acknowledged message 'please [b]' was lost",
    ]


async def test_an_unanswered_message_counts_as_lost_only_when_required(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(turn("a", "m-1"))
    await store(conn, records)
    transcript = said(records, {"m-1": "please [a]", "m-3": "unanswered"})
    lenient = checker(pg_params, tmp_path, "a")
    strict = InvariantChecker(
        pg_params, [AGENT], effects=lenient.effects, require_accepted_messages=True
    )

    verdict = await lenient.verify([transcript])
    problems = await problems_of(strict, transcript)

    assert [m.message_id for m in verdict.lost_messages] == ["m-3"]
    assert problems == [f"{AGENT}: acknowledged message 'unanswered' was lost"]


async def test_an_open_intent_is_returned_not_refused(
    conn: Connection, pg_params: ConnectParams, tmp_path: Path
) -> None:
    records = sealed(turn("a", "m-1")[:3])  # the intent, and then the crash
    await store(conn, records)

    verdict = await checker(pg_params, tmp_path, "a").verify([said(records, {"m-1": "x"})])

    [held] = verdict.open_intents
    assert (held.call_id, held.tool, held.lane) == ("call-a", EFFECT_TOOL, "edge")


async def test_a_failure_unreported_in_time_or_without_a_next_step_fails(
    pg_params: ConnectParams,
) -> None:
    check = InvariantChecker(pg_params, [AGENT])
    check.fault("a test fault")

    async def never() -> str | None:
        return None

    async def mute() -> str | None:
        return "agent-1 crashed"

    async def helpful() -> str | None:
        return "agent-1 crashed: start it with choirctl agent start agent-1"

    async def unhealthy() -> bool:
        return False

    with pytest.raises(
        InvariantViolation, match=re.escape("not reported to the operator within 0.2 s")
    ):
        await check.reported(never, within=0.2)
    with pytest.raises(InvariantViolation, match="the report names no next step"):
        await check.reported(mute)
    with pytest.raises(InvariantViolation, match=re.escape("not healthy again within 0.2 s")):
        await check.healthy(unhealthy, within=0.2)
    report = await check.reported(helpful)
    assert report.text.endswith("agent start agent-1")
    assert [what for what, _ in check.timings] == ["reported: a test fault"]
