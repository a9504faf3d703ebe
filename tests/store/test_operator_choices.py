"""`choir.store.operator_choices` on real Postgres: the config_version never goes backwards, a
restart on the same config keeps it and on a changed one moves on; start overrides round-trip."""

from __future__ import annotations

from choir.store.agents import ensure_agent
from choir.store.operator_choices import (
    StoredVersion,
    restored_version,
    save_config_version,
    save_start_overrides,
    start_overrides_of,
    stored_config_version,
)
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Connection


async def test_the_version_is_kept_and_never_goes_backwards(conn: Connection) -> None:
    await apply_control_schema(conn)
    assert await stored_config_version(conn) is None

    await save_config_version(conn, 3, "hash-a")
    await save_config_version(conn, 2, "hash-b")  # a write that lost the race: ignored
    await save_config_version(conn, 4, "hash-c")

    assert await stored_config_version(conn) == StoredVersion(4, "hash-c")


def test_a_restart_serves_the_stored_version_or_the_next() -> None:
    assert restored_version(None, "hash-a") == 1
    assert restored_version(StoredVersion(7, "hash-a"), "hash-a") == 7
    assert restored_version(StoredVersion(7, "hash-a"), "hash-b") == 8


async def test_start_overrides_round_trip(conn: Connection) -> None:
    await apply_control_schema(conn)
    await ensure_agent(conn, "agent-1")
    assert await start_overrides_of(conn, "agent-1") is None

    await save_start_overrides(conn, "agent-1", {"llm": "sonnet", "voice_profile": None})

    assert await start_overrides_of(conn, "agent-1") == {"llm": "sonnet", "voice_profile": None}
    assert await start_overrides_of(conn, "agent-9") is None
