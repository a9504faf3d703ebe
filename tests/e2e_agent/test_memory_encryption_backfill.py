"""Items written in the clear before a memory was marked encrypted are sealed at the first start
with its key: a real choird and Postgres, the real `choir-agent` on the process runtime and a
scripted model that reads the memory as a model would.

agent-1's personal memory holds an item with two versions and a vector, and another with a
vector, written in the clear (by the store: as before the marking); a knowledge note beside
them stays as it is. Started with the key, every row of the personal items is sealed — the
items and each version, no plaintext anywhere — and their vectors deleted; the start's answer
says how many (choird's log too: `tests/faults/test_seal_existing_faults.py`). The operator's
views open them with the key, the agent reads them, BM25 finds them by name only, and `memory
stats` counts them neither covered nor missing. Stopped, they are listed locked. A second keyed
start seals nothing more.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.sealed_items import LOCKED_TEXT, SEALED_KEY, SEALED_TEXT, open_item
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.scripted import Script
from choir.store.postgres.idents import agent_schema, quote_ident
from tests.ctl.cli import choirctl
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.memory import embed, memory_store
from tests.harness.memory_encryption import SCRIPT, SECRET, encrypt_personal, say

pytestmark = pytest.mark.slow

FIRST = "The user's cat is called Tabby."
TEA = "The user drinks green tea every morning."
NOTE = "The deploy runs on Postgres sixteen."
SCHEMA = quote_ident(agent_schema("agent-1"))
NOTICE = "sealed 2 items of agent-1/personal written before it was marked encrypted"


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(home: ChoirHome) -> ChoirHome:
    return encrypt_personal(home)


async def _rows(daemon: ChoirDaemon) -> dict[str, Any]:
    """agent-1's knowledge as stored: each item's and version's text and data, by class, and
    which items have a vector."""
    assert daemon.database is not None
    async with daemon.database.pool.acquire() as conn:
        items = await conn.fetch(
            f"SELECT d.name, d.memory_class, d.text, d.data FROM {SCHEMA}.knowledge_documents d "
            "ORDER BY d.name"
        )
        versions = await conn.fetch(
            f"SELECT d.name, v.version, v.text, v.data FROM {SCHEMA}.knowledge_versions v "
            f"JOIN {SCHEMA}.knowledge_documents d ON d.id = v.document_id "
            "ORDER BY d.name, v.version"
        )
        vectors = await conn.fetch(
            f"SELECT d.name FROM {SCHEMA}.knowledge_embeddings e "
            f"JOIN {SCHEMA}.knowledge_documents d ON d.id = e.document_id ORDER BY d.name"
        )
    return {
        "items": {row["name"]: (row["memory_class"], row["text"], row["data"]) for row in items},
        "versions": [(row["name"], row["version"], row["text"], row["data"]) for row in versions],
        "vectors": [row["name"] for row in vectors],
    }


def _personal(rows: dict[str, Any]) -> dict[str, Any]:
    """The rows of the personal items (a session's close adds knowledge items beside them)."""
    names = {
        name for name, (memory_class, *_) in rows["items"].items() if memory_class == "personal"
    }
    return {
        "items": {name: row for name, row in rows["items"].items() if name in names},
        "versions": [row for row in rows["versions"] if row[0] in names],
        "vectors": [name for name in rows["vectors"] if name in names],
    }


async def _written_in_the_clear(daemon: ChoirDaemon) -> None:
    store = memory_store(daemon)
    personal = Placement("personal", "console")
    pet = await store.add_knowledge(
        "agent-1",
        FIRST,
        name="user.pet",
        metadata={"tags": ["pet"]},
        fields=ItemFields(data={"species": "cat"}, memory=personal),
    )
    await store.write_knowledge(
        "agent-1", "user.pet", SECRET, fields=ItemFields(data={"species": "cat", "age": 3})
    )
    tea = await store.add_knowledge(
        "agent-1", TEA, name="user.tea", fields=ItemFields(memory=personal)
    )
    note = await store.add_knowledge("agent-1", NOTE, name="note.deploy")
    await embed(daemon, "agent-1", "knowledge", [(pet.id, SECRET), (tea.id, TEA), (note.id, NOTE)])


def _start(home: ChoirHome, key: bytes, *extra: str) -> Any:
    return choirctl(
        home.root,
        "agent", "start", "agent-1", "--dm", "console", "--new-session", "--memory-key-file", "-",
        *extra,
        stdin=key.hex(),
    )  # fmt: skip


async def test_items_written_before_the_marking_are_sealed_at_the_first_keyed_start(
    home: ChoirHome,
) -> None:
    key = secrets.token_bytes(32)
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        await daemon.memory_started()
        await _written_in_the_clear(daemon)
        before = await _rows(daemon)
        assert before["vectors"] == ["note.deploy", "user.pet", "user.tea"]
        found = await client.memory_search("agent-1", "Miso", store="knowledge", mode="text")
        assert [hit.text for hit in found.hits] == [SECRET]  # in the clear: found by content

        run = await asyncio.to_thread(_start, home, key, "--json")
        assert run.code == 0, run
        assert run.json()["memory_sealed"] == [NOTICE]
        after = await _rows(daemon)
        stored = [part for row in after["items"].values() for part in map(str, row)]
        stored += [part for row in after["versions"] for part in map(str, row)]
        assert not any(word in part for part in stored for word in ("Miso", "Tabby", "green tea"))
        for name in ("user.pet", "user.tea"):
            memory_class, text, data = after["items"][name]
            assert (memory_class, text, list(data)) == ("personal", SEALED_TEXT, [SEALED_KEY])
        assert after["items"]["note.deploy"] == before["items"]["note.deploy"]  # not encrypted
        pet_versions = [row for row in after["versions"] if row[0] == "user.pet"]
        assert [(v, text) for _, v, text, _ in pet_versions] == [(1, SEALED_TEXT), (2, SEALED_TEXT)]
        assert [open_item(key, "agent-1", "personal", d).text for *_, d in pet_versions] == [
            FIRST,
            SECRET,
        ]
        assert after["vectors"] == ["note.deploy"]  # no vector of plaintext remains

        # the operator's views open them with the key; BM25 finds them by name, not content
        shown = await client.knowledge_show("agent-1", "user.pet")
        assert (shown.text, shown.data) == (SECRET, {"species": "cat", "age": 3})
        history = await client.knowledge_history("agent-1", "user.pet")
        assert [v.text for v in history.versions] == [SECRET, FIRST]
        assert (
            await client.memory_search("agent-1", "Miso", store="knowledge", mode="text")
        ).hits == []
        by_name = await client.memory_search("agent-1", "pet", store="knowledge", mode="text")
        assert [hit.id for hit in by_name.hits] == [str(shown.id)]
        stats = (await client.memory_stats("agent-1")).agents[0]
        assert (stats.vectors_missing, stats.vector_coverage) == (0, 1.0)  # the note alone
        # the agent reads them
        assert await say(client, "what is my pet", "found") == f"found: {SECRET}"
        await client.agent_stop("agent-1")

        history = await client.knowledge_history("agent-1", "user.pet")
        assert [history.item.text] + [v.text for v in history.versions] == [LOCKED_TEXT] * 3

        # a second keyed start finds nothing in the clear: nothing sealed again
        again = await asyncio.to_thread(_start, home, key)
        assert again.code == 0, again
        assert "sealed" not in again.out
        assert _personal(await _rows(daemon)) == _personal(after)
        await client.agent_stop("agent-1")


async def test_a_restart_with_the_key_held_seals_a_memory_marked_encrypted_since_the_start(
    home: ChoirHome,
) -> None:
    """Before: only `agent start` with a key sealed what was written before the marking, so a
    memory marked encrypted while the agent ran stayed in the clear across `agent restart`."""
    key = secrets.token_bytes(32)
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        await daemon.memory_started()
        note = await memory_store(daemon).add_knowledge(
            "agent-1", NOTE, name="note.deploy", fields=ItemFields(memory=Placement("app"))
        )
        await embed(daemon, "agent-1", "knowledge", [(note.id, NOTE)])
        run = await asyncio.to_thread(_start, home, key, "--json")
        assert (run.code, run.json()["memory_sealed"]) == (0, []), run
        data = read_config(home)  # the app memory encrypted too, applied while it runs
        data["agents"]["agent-1"]["memories"].append(
            {"class": "app", "role": "read-write", "encrypted": True}
        )
        write_config(home, data)
        for verb in ("load", "apply"):
            done = await asyncio.to_thread(choirctl, home.root, "config", verb)
            assert done.code == 0, done

        restarted = await asyncio.to_thread(
            choirctl, home.root, "agent", "restart", "agent-1", "--json"
        )
        assert restarted.code == 0, restarted
        notice = "sealed 1 item of agent-1/app written before it was marked encrypted"
        assert restarted.json()["memory_sealed"] == [notice]
        rows = await _rows(daemon)
        assert rows["items"]["note.deploy"][1] == SEALED_TEXT
        assert "note.deploy" not in rows["vectors"]
        shown = await client.knowledge_show("agent-1", "note.deploy")
        assert shown.text == NOTE  # opened with the key choird holds
        await client.agent_stop("agent-1")
