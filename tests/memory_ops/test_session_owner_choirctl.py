"""The operator sees what a user's sessions left, with its owner: `choirctl memory search` (both
stores) and `knowledge list` show the user, `memory about <user>` lists the user's
session-derived items, and `memory forget` removes one; the real CLI against a real choird. The
items are stored through choird's store as a session's close stores them (`store_entries`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from choir.core.memory.chunks import Tier
from choir.core.memory.summaries.archives import ArchiveEntry
from choir.daemon.memory.closing.archives import store_entries
from tests.ctl.cli import table_rows
from tests.memory.store.support import event_chunks

from .conftest import Filled
from .test_memory_choirctl import run

NAME = "archive/0b0b0b0b0b0b0b0b/8"


def unindexed(agent_id: str, target: Any, item_id: UUID, text: str) -> None:
    """No vector: these are read by text."""


async def test_the_operator_sees_a_users_session_memory_with_its_owner(filled: Filled) -> None:
    store = filled.store
    archive = ArchiveEntry(
        NAME,
        "Compaction archive: bob's zanzibar budget is 40 euros.",
        {"compaction_archive": {"session_id": "s-0b0b0b0b0b0b0b0b"}},
        "archive:0b0b0b0b0b0b0b0b",
    )
    assert await store_entries(store, unindexed, "agent-1", [archive], owner="tg-bob") == 1
    chunks = event_chunks(["bob: my zanzibar budget is 40 euros"])
    await store.add_session_chunks(
        "agent-1", "s-0b0b0b0b0b0b0b0b", Tier.MID_TERM, chunks, owner="tg-bob"
    )

    knowledge = await run(
        filled, "memory", "search", "agent-1", "zanzibar", "--store", "knowledge", "--mode", "text"
    )
    found = await run(
        filled, "memory", "search", "agent-1", "zanzibar", "--store", "knowledge", "--mode",
        "text", "--json",
    )  # fmt: skip
    rows = await run(filled, "memory", "search", "agent-1", "zanzibar", "--mode", "text", "--json")
    listed = await run(filled, "knowledge", "list", "agent-1")
    about = await run(filled, "memory", "about", "agent-1", "tg-bob", "--json")
    forgot = await run(filled, "memory", "forget", "agent-1", NAME, "--yes")
    after = await run(filled, "memory", "about", "agent-1", "tg-bob", "--json")

    assert knowledge.code == 0, knowledge.err
    assert f"{NAME} (archive:0b0b0b0b0b0b0b0b) [user tg-bob]" in knowledge.out
    assert [(h["name"], h["user"]) for h in found.json()["hits"]] == [(NAME, "tg-bob")]
    assert [(h["session_id"], h["user"]) for h in rows.json()["hits"]] == [
        ("s-0b0b0b0b0b0b0b0b", "tg-bob")
    ]
    memories = {row["name"]: row["memory"] for row in table_rows(listed.out.splitlines())}
    assert memories[NAME] == "knowledge (tg-bob)"  # knowledge class, the user's
    assert [item["name"] for item in about.json()["items"]] == [NAME]
    assert forgot.code == 0, forgot.err
    assert after.json()["items"] == []
