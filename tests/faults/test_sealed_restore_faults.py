"""The operator's restore of an encrypted item killed midway: choird (a real process) dies with
the restored version written — sealed with the key it holds — inside its transaction, before it
commits. Nothing is half-written: the item keeps its version and its sealed value, no version is
added, nothing of the content is in the clear in any row, and no vector was made of it."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from choir.core.memory.sealed_items import SEALED_KEY, SEALED_TEXT
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import Run, choirctl
from tests.faults.support import spawn_choird, teardown
from tests.harness.homes import external_postgres, make_home
from tests.harness.memory_encryption import encrypt_personal
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FIRST = "The user's cat is called Miso."
SECOND = "The user's cat is called Tabby."


async def _rows(pool: Pool) -> dict[str, Any]:
    """agent-1's knowledge as stored: the items, every version, the vectors."""
    schema = quote_ident(agent_schema("agent-1"))
    async with pool.acquire() as conn:
        items = await conn.fetch(f"SELECT text, data FROM {schema}.knowledge_documents")
        versions = await conn.fetch(f"SELECT text, data FROM {schema}.knowledge_versions")
        vectors = await conn.fetchval(f"SELECT count(*) FROM {schema}.knowledge_embeddings")
    return {
        "items": [(row["text"], sorted(row["data"])) for row in items],
        "versions": [(row["text"], sorted(row["data"])) for row in versions],
        "vectors": vectors,
    }


async def test_a_sealed_restore_killed_before_commit_writes_nothing(
    root: Path, pg_params: ConnectParams
) -> None:
    home = encrypt_personal(make_home(root, postgres=external_postgres(pg_params)))
    key = secrets.token_bytes(32)

    def ctl(*args: str, stdin: str | None = None) -> Any:
        return asyncio.to_thread(choirctl, home.root, *args, stdin=stdin)

    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.restore.after_write=exit",
            )
            started: Run = await ctl(
                "agent", "start", "agent-1", "--dm", "console", "--memory-key-file", "-",
                stdin=key.hex(),
            )  # fmt: skip
            assert started.code == 0, started.err
            added: Run = await ctl(
                "knowledge", "add", "agent-1", FIRST, "--name", "user.pet",
                "--memory", "personal", "--user", "console",
            )  # fmt: skip
            assert added.code == 0, added.err
            written: Run = await ctl("knowledge", "write", "agent-1", "user.pet", SECOND)
            assert written.code == 0, written.err
            before = await _rows(pool)
            killed: Run = await ctl("knowledge", "restore", "agent-1", "user.pet", "1")
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=30)
            after = await _rows(pool)
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert process.returncode == 137  # killed inside the restore's transaction
    assert killed.code != 0
    assert before["items"] == [(SEALED_TEXT, [SEALED_KEY])]
    assert before["versions"] == [(SEALED_TEXT, [SEALED_KEY])] * 2
    assert after == before  # no third version, the item as it was
    assert after["vectors"] == 0
