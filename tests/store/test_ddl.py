from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest

from choir.errors import ConflictError
from choir.store.postgres.ddl import (
    AGENT_MIGRATIONS,
    CONTROL_MIGRATIONS,
    CONTROL_SCOPE,
    GATEWAY_MIGRATIONS,
    HOST_TOOL_MIGRATIONS,
    PROPOSAL_MIGRATIONS,
    RECOVERY_MIGRATIONS,
    USAGE_MIGRATIONS,
    apply_control_schema,
)
from choir.store.postgres.pool import Connection

CONTROL_TABLES = {
    "agents",
    "sessions",
    "session_events",
    "session_snapshots",
    "session_artifacts",
    "session_inbox",
    "pending_approvals",
    "leases",
    "schema_version",
    "host_tool_calls",
    "memory_closes",
    "config_state",
    "gateway_offsets",
    "gateway_reply_cursors",
    "gateway_job_cards",
    "gateway_card_cursors",
    "llm_usage",
    "recovery_items",
    "proposal_applies",
    "approval_audit",
}


@pytest.mark.parametrize(
    "migrations",
    [
        CONTROL_MIGRATIONS,
        AGENT_MIGRATIONS,
        HOST_TOOL_MIGRATIONS,
        GATEWAY_MIGRATIONS,
        USAGE_MIGRATIONS,
        RECOVERY_MIGRATIONS,
        PROPOSAL_MIGRATIONS,
    ],
)
def test_migration_versions_count_up_from_one(migrations) -> None:
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))


async def test_control_schema_creates_every_control_table(conn: Connection) -> None:
    await apply_control_schema(conn)
    rows = await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'choir_control'"
    )
    assert {row["table_name"] for row in rows} == CONTROL_TABLES


async def test_control_schema_records_versions_and_reruns_as_a_no_op(conn: Connection) -> None:
    first = await apply_control_schema(conn)
    second = await apply_control_schema(conn)

    assert first == [m.version for m in CONTROL_MIGRATIONS]
    assert second == []
    rows = await conn.fetch(
        "SELECT version, description FROM choir_control.schema_version WHERE scope = $1",
        CONTROL_SCOPE,
    )
    assert [(r["version"], r["description"]) for r in rows] == [
        (m.version, m.description) for m in CONTROL_MIGRATIONS
    ]


async def test_a_database_migrated_by_a_newer_choir_is_refused(conn: Connection) -> None:
    await apply_control_schema(conn)
    await conn.execute(
        "INSERT INTO choir_control.schema_version (scope, version, description) "
        "VALUES ('control', 99, 'from the future')"
    )
    with pytest.raises(
        ConflictError, match=r"control schema is at version 99, newer .*; upgrade choir$"
    ):
        await apply_control_schema(conn)


async def test_session_events_reject_a_second_event_at_the_same_rev(conn: Connection) -> None:
    await apply_control_schema(conn)
    await conn.execute("INSERT INTO choir_control.agents (agent_id, name) VALUES ('a', 'A')")
    await conn.execute(
        "INSERT INTO choir_control.sessions (session_id, agent_id, status) "
        "VALUES ('s', 'a', 'active')"
    )
    insert = (
        "INSERT INTO choir_control.session_events "
        "(session_id, rev, event_type, lane, payload, hash_prev, hash, created_at) "
        "VALUES ('s', 1, 'T', 'edge', $1, 'p', $2, now())"
    )
    await conn.execute(insert, {"n": 1}, "h1")
    with pytest.raises(asyncpg.UniqueViolationError, match="session_events_session_id_rev_key"):
        await conn.execute(insert, {"n": 2}, "h2")


async def test_approvals_have_known_states_and_a_resolution_time_once_resolved(
    conn: Connection,
) -> None:
    await apply_control_schema(conn)
    insert = (
        "INSERT INTO choir_control.pending_approvals "
        "(id, agent_id, request_type, payload, status, resolved_at) "
        "VALUES ($1, 'a', 'x', '{}', $2, $3)"
    )
    await conn.execute(insert, "1", "failed", datetime.now(UTC))
    with pytest.raises(asyncpg.CheckViolationError, match="pending_approvals_status_check"):
        await conn.execute(insert, "2", "maybe", datetime.now(UTC))
    with pytest.raises(asyncpg.CheckViolationError, match="pending_approvals_status_check"):
        await conn.execute(insert, "4", "timed_out", datetime.now(UTC))  # §19.6: rejected now
    with pytest.raises(asyncpg.CheckViolationError, match="pending_approvals_resolved_check"):
        await conn.execute(insert, "3", "approved", None)
