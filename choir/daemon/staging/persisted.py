"""The config_version across choird restarts: restored at start from `choir_control.config_state`.

A restarted choird serves the version it last acknowledged when config.json is the config that
version named, and the next one when config.json changed while it was down (agents must fetch
it); the start records what it serves, so a later restart compares against it.
"""

from __future__ import annotations

from choir.config import LoadedConfig
from choir.store.operator_choices import (
    restored_version,
    save_config_version,
    stored_config_version,
)
from choir.store.postgres.pool import Pool


async def restore_config_version(pool: Pool, loaded: LoadedConfig) -> int:
    """The config_version to serve `loaded` under, recorded before it is served."""
    async with pool.acquire() as conn, conn.transaction():
        version = restored_version(await stored_config_version(conn), loaded.config_hash)
        await save_config_version(conn, version, loaded.config_hash)
    return version
