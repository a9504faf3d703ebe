"""What an operator chose that must outlive choird: the config_version and each start's overrides.

`choir_control.config_state` holds one row: the config_version choird serves and the hash of the
config it names, written before a `config apply` or a `model set`/`voice set` answers, so a
choird killed right after an answer comes back with the version it acknowledged. (The rebound
session itself is in `sessions.resource_bindings`, written by the same verbs.)
`choir_control.agents.start_overrides` holds each agent's last start's overrides (`--llm`,
`--voice-profile`, …), which `agent restart` reverts a transient `model set` to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from choir.store.postgres.pool import Connection

_SAVE_VERSION: Final = """
INSERT INTO choir_control.config_state (only_row, config_version, config_hash, updated_at)
VALUES (true, $1, $2, now())
ON CONFLICT (only_row) DO UPDATE
SET config_version = EXCLUDED.config_version,
    config_hash = EXCLUDED.config_hash,
    updated_at = EXCLUDED.updated_at
WHERE choir_control.config_state.config_version <= EXCLUDED.config_version
"""
"""Never backwards: two bumps whose writes overtake each other keep the higher version."""

_VERSION: Final = "SELECT config_version, config_hash FROM choir_control.config_state"

_SAVE_OVERRIDES: Final = (
    "UPDATE choir_control.agents SET start_overrides = $2::jsonb WHERE agent_id = $1"
)

_OVERRIDES: Final = "SELECT start_overrides FROM choir_control.agents WHERE agent_id = $1"


@dataclass(frozen=True, slots=True)
class StoredVersion:
    config_version: int
    config_hash: str


async def save_config_version(conn: Connection, version: int, config_hash: str) -> None:
    """Record that choird serves `config_hash` as `version` (a lower version never wins)."""
    await conn.execute(_SAVE_VERSION, version, config_hash)


async def stored_config_version(conn: Connection) -> StoredVersion | None:
    """The last recorded version, or None on a database no choird recorded one in."""
    row = await conn.fetchrow(_VERSION)
    return None if row is None else StoredVersion(row["config_version"], row["config_hash"])


def restored_version(stored: StoredVersion | None, config_hash: str) -> int:
    """The config_version a starting choird serves `config_hash` under: the stored one when the
    config is the one it named, the next one when config.json changed while choird was down
    (agents must refetch it), 1 on a fresh database."""
    if stored is None:
        return 1
    if stored.config_hash == config_hash:
        return stored.config_version
    return stored.config_version + 1


async def save_start_overrides(conn: Connection, agent_id: str, overrides: dict[str, Any]) -> None:
    """Remember `agent_id`'s last start's overrides (role -> name or None); its row exists
    (the session start made it)."""
    await conn.execute(_SAVE_OVERRIDES, agent_id, overrides)


async def start_overrides_of(conn: Connection, agent_id: str) -> dict[str, Any] | None:
    """The overrides `save_start_overrides` recorded, or None when none were."""
    overrides: dict[str, Any] | None = await conn.fetchval(_OVERRIDES, agent_id)
    return overrides
