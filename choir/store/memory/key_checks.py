"""An agent's encrypted memories' key checks (`memory_key_checks`, agent migration 12).

Run on a connection `run_as_agent` opened (the agent's schema first on the search path).
"""

from __future__ import annotations

from collections.abc import Mapping

from choir.store.postgres.pool import Connection


async def key_checks(conn: Connection) -> dict[str, bytes]:
    """The recorded key check of each memory class that has one."""
    rows = await conn.fetch("SELECT memory_class, key_check FROM memory_key_checks")
    return {row["memory_class"]: bytes(row["key_check"]) for row in rows}


async def record_key_checks(conn: Connection, checks: Mapping[str, bytes]) -> None:
    """Record the checks of memories that have none yet (a recorded one is never replaced:
    another key would make the sealed items unreadable)."""
    await conn.executemany(
        "INSERT INTO memory_key_checks (memory_class, key_check) VALUES ($1, $2) "
        "ON CONFLICT (memory_class) DO NOTHING",
        list(checks.items()),
    )
