"""`choirctl knowledge add|put --memory --user`: the operator writes any of an agent's memories
(its system memory, the agent's definition, included); the real CLI against a real choird."""

from __future__ import annotations

import pytest

from .conftest import Filled
from .test_memory_choirctl import run


async def test_the_operator_writes_system_and_personal_memory(filled: Filled) -> None:
    system = await run(
        filled, "knowledge", "add", "agent-1", "I am agent-1, the release helper.",
        "--name", "identity", "--memory", "system",
    )  # fmt: skip
    personal = await run(
        filled, "knowledge", "put", "agent-1", "Prefers short answers.", "--name",
        "user.style", "--memory", "personal", "--user", "console",
    )  # fmt: skip
    shown = await run(filled, "knowledge", "show", "agent-1", "user.style")
    shown_json = (await run(filled, "knowledge", "show", "agent-1", "identity", "--json")).json()
    again = await run(filled, "knowledge", "put", "agent-1", "Prefers long answers.", "--name",
                      "user.style")  # fmt: skip

    assert system.out == "stored identity in agent-1's system memory; embedded\n", system.err
    assert personal.out == "stored user.style in agent-1's personal memory; embedded\n"
    assert "memory    personal (user console)" in shown.out
    assert (shown_json["memory"], shown_json["user"]) == ("system", None)
    assert again.out.startswith("wrote version 2 of user.style in agent-1's personal memory")
    listed = (await run(filled, "knowledge", "list", "agent-1", "--json")).json()
    assert {(i["name"], i["memory"], i["user"]) for i in listed["items"]} >= {
        ("identity", "system", None),
        ("user.style", "personal", "console"),
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("add", "agent-1", "x", "--memory", "secrets"), "unknown memory 'secrets'"),
        (("add", "agent-1", "x", "--memory", "personal"), "add --user DM (one of"),
        (("add", "agent-1", "x", "--memory", "personal", "--user", "bob"), "no DM in config"),
        (("add", "agent-1", "x", "--user", "console"), "add --memory personal"),
        (("put", "agent-1", "x", "--name", "fact", "--memory", "app"), "never changes memory"),
    ],
)
async def test_bad_memory_input_exits_2_in_one_line_and_writes_nothing(
    filled: Filled, args: tuple[str, ...], message: str
) -> None:
    await filled.client.knowledge_add("agent-1", "a fact", name="fact")
    before = await filled.client.knowledge_list("agent-1")

    refused = await run(filled, "knowledge", *args)

    assert refused.code == 2, refused.err
    assert (refused.out, refused.err.count("\n")) == ("", 1)
    assert message in refused.err
    assert await filled.client.knowledge_list("agent-1") == before
