"""Items written in the clear before a memory was marked encrypted, sealed by a keyed start that
is killed midway: choird (a real process) dies with the items' current text and data sealed
inside the transaction, their versions and vectors not yet, nothing committed. Nothing is
half-sealed: every row is as it was. A restarted choird's keyed start seals them all — items,
versions, no vector left — and says so (its answer, its log); each opens to its original text."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.sealed_items import SEALED_KEY, SEALED_TEXT, open_item
from choir.store.agent_schema import embedding_dims_of, run_as_agent
from choir.store.knowledge.writes import add_item, write_item
from choir.store.memory.vectors import set_vectors
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
TEA = "The user drinks green tea every morning."
NOTICE = "sealed 2 items of agent-1/personal written before it was marked encrypted"
SCHEMA = quote_ident(agent_schema("agent-1"))


async def _rows(pool: Pool) -> dict[str, Any]:
    """agent-1's knowledge as stored: the items, every version, the vectors."""
    async with pool.acquire() as conn:
        items = await conn.fetch(f"SELECT name, text, data FROM {SCHEMA}.knowledge_documents")
        versions = await conn.fetch(
            f"SELECT d.name, v.version, v.text, v.data FROM {SCHEMA}.knowledge_versions v "
            f"JOIN {SCHEMA}.knowledge_documents d ON d.id = v.document_id"
        )
        vectors = await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.knowledge_embeddings")
    return {
        "items": sorted((row["name"], row["text"], row["data"]) for row in items),
        "versions": sorted(
            (row["name"], row["version"], row["text"], row["data"]) for row in versions
        ),
        "vectors": vectors,
    }


async def _written_in_the_clear(pool: Pool) -> None:
    """user.pet (two versions) and user.tea in personal memory, each with a vector."""
    async with pool.acquire() as conn:
        await poll_until(lambda: embedding_dims_of(conn, "agent-1"), within=30)
        dims = await embedding_dims_of(conn, "agent-1")
    assert dims is not None
    personal = ItemFields(memory=Placement("personal", "console"), data={"species": "cat"})
    async with pool.acquire() as conn, run_as_agent(conn, "agent-1") as tx:
        pet = await add_item(tx, FIRST, name="user.pet", metadata={}, fields=personal)
        await write_item(tx, pet.id, SECOND, metadata={}, fields=ItemFields(data={"age": 3}))
        tea = await add_item(tx, TEA, name="user.tea", metadata={}, fields=personal)
        vector = np.ones(dims, dtype=np.float32)
        await set_vectors(tx, "knowledge", [(pet.id, vector), (tea.id, vector)])


async def test_a_sealing_killed_before_commit_is_finished_by_the_next_keyed_start(
    root: Path, pg_params: ConnectParams
) -> None:
    home = encrypt_personal(make_home(root, postgres=external_postgres(pg_params)))
    key = secrets.token_bytes(32)

    def ctl(*args: str, stdin: str | None = None) -> Any:
        return asyncio.to_thread(choirctl, home.root, *args, stdin=stdin)

    start = ("agent", "start", "agent-1", "--dm", "console", "--memory-key-file", "-")
    choird = None
    try:
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.seal.after_items=exit",
            )
            await _written_in_the_clear(pool)
            before = await _rows(pool)
            killed: Run = await ctl(*start, stdin=key.hex())
            process = choird.process
            await poll_until(lambda: process.poll() is not None, within=30)
            assert process.returncode == 137  # killed inside the sealing's transaction
            assert killed.code != 0
            assert await _rows(pool) == before  # nothing half-sealed

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            started: Run = await ctl(*start, stdin=key.hex())
            assert started.code == 0, started.err
            assert NOTICE in started.out
            after = await _rows(pool)
            stopped: Run = await ctl("agent", "stop", "agent-1")
            assert stopped.code == 0, stopped.err
            restarted: Run = await ctl(*start, stdin=key.hex())
            assert restarted.code == 0, restarted.err
            assert "sealed" not in restarted.out
            assert await _rows(pool) == after  # nothing sealed twice
    finally:
        await asyncio.to_thread(teardown, home, choird)

    assert after["vectors"] == 0
    assert [(name, text, list(data)) for name, text, data in after["items"]] == [
        ("user.pet", SEALED_TEXT, [SEALED_KEY]),
        ("user.tea", SEALED_TEXT, [SEALED_KEY]),
    ]
    opened = {
        (name, version): open_item(key, "agent-1", "personal", data)
        for name, version, text, data in after["versions"]
        if text == SEALED_TEXT
    }
    assert {where: (o.text, o.data) for where, o in opened.items()} == {
        ("user.pet", 1): (FIRST, {"species": "cat"}),
        ("user.pet", 2): (SECOND, {"age": 3}),
        ("user.tea", 1): (TEA, {"species": "cat"}),
    }
    pet = next(data for name, _, data in after["items"] if name == "user.pet")
    assert open_item(key, "agent-1", "personal", pet).text == SECOND
    assert home.choird_log.read_text().count(NOTICE) == 1
