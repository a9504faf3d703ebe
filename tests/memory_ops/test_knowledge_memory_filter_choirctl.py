"""`choirctl knowledge list` and `memory search` by memory: the memory column, `--memory` (every
user's personal items with `personal`) and `--user` (one user's); the real CLI against a real
choird. A personal item of a user with no DM here (`tg-bob`, a gateway user id an agent's
session learnt it from) is written through choird's store, as the agent's tool does."""

from __future__ import annotations

import pytest

from choir.core.memory.knowledge.graph import ItemFields, Placement
from tests.ctl.cli import table_rows

from .conftest import Filled
from .test_memory_choirctl import run


async def _memories(filled: Filled) -> None:
    client = filled.client
    await client.knowledge_add("agent-1", "the office wifi is choir-guest", name="wifi")
    await client.knowledge_add(
        "agent-1", "I am agent-1, the release helper", name="identity", fields={"memory": "system"}
    )
    await client.knowledge_add(
        "agent-1", "the wifi password is on the fridge", name="wifi.console",
        fields={"memory": "personal", "user": "console"},
    )  # fmt: skip
    await filled.store.add_knowledge(
        "agent-1", "bob's wifi runs on channel 11", name="wifi.bob",
        fields=ItemFields(memory=Placement("personal", "tg-bob")),
    )  # fmt: skip


async def test_the_list_shows_each_items_memory_and_filters_by_it(filled: Filled) -> None:
    await _memories(filled)

    listed = await run(filled, "knowledge", "list", "agent-1")
    system = await run(filled, "knowledge", "list", "agent-1", "--memory", "system", "--json")
    personal = await run(filled, "knowledge", "list", "agent-1", "--memory", "personal")
    console = await run(filled, "knowledge", "list", "agent-1", "--user", "console", "--json")
    app = await run(filled, "knowledge", "list", "agent-1", "--memory", "app")

    assert (listed.code, listed.err) == (0, "")
    rows = {row["name"]: row["memory"] for row in table_rows(listed.out.splitlines())}
    assert rows == {
        "wifi": "knowledge",
        "identity": "system",
        "wifi.console": "personal (console)",
        "wifi.bob": "personal (tg-bob)",
    }
    assert [item["name"] for item in system.json()["items"]] == ["identity"]
    assert [row["name"] for row in table_rows(personal.out.splitlines())] == [
        "wifi.console", "wifi.bob"
    ]  # fmt: skip
    assert [(i["name"], i["user"]) for i in console.json()["items"]] == [
        ("wifi.console", "console")
    ]
    assert app.out == "(none)\n"


async def test_memory_search_keeps_to_one_memory(filled: Filled) -> None:
    await _memories(filled)

    def names(found: dict) -> list[str]:
        return sorted(hit["name"] for hit in found["hits"])

    every = await run(
        filled, "memory", "search", "agent-1", "wifi", "--store", "knowledge", "--mode", "text",
        "--json",
    )  # fmt: skip
    personal = await run(
        filled, "memory", "search", "agent-1", "wifi", "--store", "knowledge", "--mode", "text",
        "--memory", "personal", "--json",
    )  # fmt: skip
    bob = await run(
        filled, "memory", "search", "agent-1", "wifi", "--store", "knowledge", "--user", "tg-bob",
        "--json",
    )  # fmt: skip
    knowledge = await run(
        filled, "memory", "search", "agent-1", "wifi", "--store", "knowledge", "--memory",
        "knowledge",
    )  # fmt: skip

    assert sorted((hit["name"], hit["memory"]) for hit in every.json()["hits"]) == [
        ("wifi", "knowledge"),
        ("wifi.bob", "personal"),
        ("wifi.console", "personal"),
    ]  # each hit names its memory
    assert names(personal.json()) == ["wifi.bob", "wifi.console"]
    assert names(bob.json()) == ["wifi.bob"]
    assert knowledge.code == 0, knowledge.err
    assert "1 hit(s)" in knowledge.out.splitlines()[0]
    assert [(row["from"], row["memory"]) for row in table_rows(knowledge.out.splitlines()[1:])] == [
        ("wifi", "knowledge")
    ]  # the text table names each hit's memory, as `knowledge list` does


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("knowledge", "list", "agent-1", "--memory", "secrets"), "unknown memory 'secrets'"),
        (("knowledge", "list", "agent-1", "--memory", "app", "--user", "console"),
         "--user keeps a user's personal items"),
        (("knowledge", "list", "agent-1", "--user", ""), "--user needs a DM name"),
        (("memory", "search", "agent-1", "wifi", "--memory", "app"),
         "filter the knowledge store only"),
    ],
)  # fmt: skip
async def test_a_bad_memory_filter_exits_2_in_one_line(
    filled: Filled, args: tuple[str, ...], message: str
) -> None:
    refused = await run(filled, *args)

    assert refused.code == 2, refused.err
    assert (refused.out, refused.err.count("\n")) == ("", 1)
    assert message in refused.err
