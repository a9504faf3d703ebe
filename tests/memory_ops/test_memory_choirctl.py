"""`choirctl memory …` and `choirctl knowledge …` as an operator runs them: the real CLI in a
subprocess against a real choird (in this process, still serving while choirctl runs), its
output, `--json` shape and exit codes; a refusal is one line on stderr and writes nothing."""

from __future__ import annotations

import asyncio

import pytest

from choir.protocol.operator import answers as a
from choir.protocol.operator.views import OperatorModel
from tests.ctl.cli import Run, choirctl, choirctl_on_tty, table_rows
from tests.harness.memory import TEXTS

from .conftest import Filled


async def run(filled: Filled, *args: str, stdin: str | bytes | None = None) -> Run:
    return await asyncio.to_thread(choirctl, filled.home.root, *args, stdin=stdin)


def fields(model: type[OperatorModel]) -> set[str]:
    return set(model.model_fields)


async def test_memory_search_show_and_stats(filled: Filled):
    deploy = str(filled.chunk_ids[0])

    found = await run(filled, "memory", "search", "agent-1", "kubectl", "--mode", "text")
    data = (await run(filled, "memory", "search", "agent-1", "kubectl", "--json")).json()
    shown = await run(filled, "memory", "show", deploy)
    shown_json = (await run(filled, "memory", "show", deploy, "--json")).json()
    stats = await run(filled, "memory", "stats")
    stats_json = (await run(filled, "memory", "stats", "agent-2", "--json")).json()

    assert (found.code, found.err) == (0, "")
    lines = found.out.splitlines()
    assert lines[0] == "agent-1's session memory, text search: 1 hit(s)"
    assert lines[1].split() == ["ID", "SCORE", "FROM", "MEMORY", "TEXT"]
    assert lines[2].startswith(f"{deploy}  0.")
    assert f"{filled.session_id} mid_term revs 1-2  -       {TEXTS[0]}" in lines[2]
    assert set(data) == fields(a.MemorySearch)
    assert set(data["hits"][0]) == fields(a.MemoryHitView) - {"memory"}  # a knowledge hit's
    assert (data["mode"], data["hits"][0]["id"]) == ("hybrid", deploy)
    assert shown.code == 0
    assert f"session   {filled.session_id}" in shown.out
    assert "tier      mid_term (tool_call, chunk 0)" in shown.out
    assert "revs      1-2" in shown.out
    assert TEXTS[0] in shown.out
    assert "source events:" in shown.out
    assert "memory event 1" in shown.out
    assert "memory event 2" in shown.out
    assert set(shown_json) == fields(a.MemoryItem)
    assert [e["rev"] for e in shown_json["events"]] == [1, 2]
    assert stats.code == 0
    assert stats.out.splitlines()[1].split()[:4] == ["agent-1", "3", "(1", "sessions)"]
    assert stats.out.splitlines()[-1] == "embedding: local (256 dims), queue 0, breaker closed"
    assert [row["agent_id"] for row in stats_json["agents"]] == ["agent-2"]
    assert set(stats_json["embedding"]) == fields(a.EmbeddingView)


async def test_knowledge_put_list_show_delete(filled: Filled):
    put = await run(
        filled, "knowledge", "put", "agent-1", "standup is at nine", "--key", "team.standup",
        "--tag", "team", "--tag", "schedule",
    )  # fmt: skip
    again = await run(
        filled, "knowledge", "put", "agent-1", "standup is at ten", "--key", "team.standup",
        "--json",
    )  # fmt: skip
    listed = await run(filled, "knowledge", "list", "agent-1")
    shown = await run(filled, "knowledge", "show", "agent-1", "team.standup")
    found = await run(
        filled, "memory", "search", "agent-1", "daily meeting", "--store", "knowledge"
    )
    deleted = await run(filled, "knowledge", "delete", "agent-1", "team.standup")
    gone = await run(filled, "knowledge", "list", "agent-1", "--json")

    item_id = again.json()["item"]["id"]
    assert (put.code, put.err) == (0, "")
    assert put.out == "stored team.standup in agent-1's knowledge; embedded\n"
    assert set(again.json()) == fields(a.KnowledgeStored) - {"sealed"}  # a sealed item's
    assert again.json()["updated"] is True
    row = table_rows(listed.out.splitlines())[0]
    assert [row[c] for c in ("name", "loc", "type", "memory", "version", "vector")] == [
        "team.standup", "-", "info", "knowledge", "2", "yes"
    ]  # fmt: skip
    assert "standup is at ten" in listed.out
    assert "name      team.standup (knowledge of agent-1)" in shown.out
    assert f"id        {item_id}" in shown.out
    assert "metadata" not in shown.out  # the update carried no tags
    assert shown.out.endswith("text:\nstandup is at ten\n")
    assert item_id in found.out
    assert deleted.out == "deleted team.standup from agent-1's knowledge\n"
    assert gone.json() == {"agent_id": "agent-1", "items": [], "next_after": None}


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("memory", "search", "nobody", "x"), 4, "no agent named 'nobody' in the running config"),
        (("memory", "search", "agent-1", "x", "--store", "work"), 2,
         "unknown memory store 'work': use session or knowledge"),
        (("memory", "search", "agent-1", "x", "--mode", "fuzzy"), 2,
         "unknown search mode 'fuzzy' for store session"),
        (("memory", "search", "agent-1", "x", "--mode", "session_detail"), 2,
         "mode session_detail needs a session_id"),
        (("memory", "search", "agent-1", "x", "--limit", "0"), 2, "limit"),
        (("memory", "show", "3f0c0000-0000-4000-8000-000000000000"), 4, "no memory item"),
        (("memory", "show", "nope"), 2, "'nope' is not a memory item id"),
        (("memory", "stats", "nobody"), 4, "no agent named 'nobody'"),
        (("knowledge", "show", "agent-1", "nothing.here"), 4,
         "agent agent-1 has no knowledge item 'nothing.here'"),
        (("knowledge", "delete", "agent-1", "nothing.here"), 4,
         "agent agent-1 has no knowledge item 'nothing.here'"),
        (("knowledge", "put", "agent-1", "x" * 33_000), 2, "over the limit of 32768 bytes"),
        (("knowledge", "put", "nobody", "x"), 4, "no agent named 'nobody'"),
        (("knowledge", "write", "agent-1", "nothing.here", "x"), 4,
         "no knowledge item named 'nothing.here'"),
        (("knowledge", "rename", "agent-1", "nothing.here", "y"), 4,
         "no knowledge item named 'nothing.here'"),
        (("knowledge", "history", "agent-1", "nothing.here"), 4,
         "no knowledge item named 'nothing.here'"),
        (("knowledge", "restore", "agent-1", "nothing.here", "1"), 4,
         "no knowledge item named 'nothing.here'"),
        (("knowledge", "add", "agent-1", "x", "--name", "tab\there"), 2, "control characters"),
    ],
)  # fmt: skip
async def test_a_refusal_is_one_line_with_its_exit_code_and_writes_nothing(
    filled: Filled, args: tuple[str, ...], code: int, message: str
):
    before = (await filled.client.memory_stats()).agents  # what is stored, not the live queue

    refused = await run(filled, *args)

    assert refused.code == code, refused.err
    assert refused.out == ""
    assert refused.err.startswith("error: ")
    assert message in refused.err
    assert refused.err.count("\n") == 1
    assert (await filled.client.memory_stats()).agents == before


async def test_knowledge_add_alias_rename_write_history_restore(filled: Filled):
    added = await run(
        filled, "knowledge", "add", "agent-1", "standup is at nine", "--name", "standup"
    )
    aliased = await run(filled, "knowledge", "alias", "agent-1", "standup", "daily")
    written = await run(filled, "knowledge", "write", "agent-1", "daily", "standup is at ten")
    renamed = await run(filled, "knowledge", "rename", "agent-1", "standup", "team.standup")
    restored = await run(filled, "knowledge", "restore", "agent-1", "daily", "1")
    history = await run(filled, "knowledge", "history", "agent-1", "team.standup")
    history_json = (await run(filled, "knowledge", "history", "agent-1", "daily", "--json")).json()

    assert added.out == "stored standup in agent-1's knowledge; embedded\n"
    assert aliased.out == "standup now answers to daily\n"
    assert written.out == "wrote version 2 of standup in agent-1's knowledge; embedded\n"
    assert renamed.out == "renamed standup to team.standup in agent-1's knowledge\n"
    assert restored.out == "restored team.standup to version 1: now version 3\n"
    lines = history.out.splitlines()
    assert lines[0].split() == ["VERSION", "WRITTEN", "NAME", "TEXT"]
    assert [line.split()[0] for line in lines[1:]] == ["3", "2", "1"]
    assert lines[1].split()[3:] == ["restored", "1", "team.standup", "standup", "is", "at", "nine"]
    assert lines[2].split()[3:] == ["standup", "standup", "is", "at", "ten"]
    assert set(history_json) == fields(a.KnowledgeHistory)
    assert set(history_json["versions"][0]) == fields(a.KnowledgeVersionView)
    item = history_json["item"]
    assert (item["name"], item["aliases"], item["version"], item["text"]) == (
        "team.standup",
        ["daily"],
        3,
        "standup is at nine",
    )


NOTES = "# Deploys\n\nkubectl rollout restart, then watch the pods: ünïcode kept.\n"


async def test_a_text_of_dash_is_read_from_standard_input(filled: Filled):
    """A file piped in, as an operator adds a document: `… - --name deploys < notes.md`."""
    added = await run(
        filled, "knowledge", "add", "agent-1", "-", "--name", "deploys", stdin=NOTES.encode()
    )
    written = await run(filled, "knowledge", "write", "agent-1", "deploys", "-", stdin="v2\n")
    put = await run(filled, "knowledge", "put", "agent-1", "-", "--key", "deploys", stdin=NOTES)
    history = (await run(filled, "knowledge", "history", "agent-1", "deploys", "--json")).json()

    assert (added.code, added.err) == (0, ""), added.err
    assert added.out == "stored deploys in agent-1's knowledge; embedded\n"
    assert (written.code, put.code) == (0, 0), (written.err, put.err)
    texts = [version["text"] for version in history["versions"]]
    assert texts == [NOTES, "v2\n", NOTES]  # newest first, every byte as piped in


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("add", "agent-1", "-"), b"caf\xe9 latin-1", "standard input is not UTF-8 text "
         "(a bad byte at offset 3): knowledge holds text; convert it first (iconv -t UTF-8)"),
        (("put", "agent-1", "-", "--key", "big"), "x" * 33_000, "over the limit of 32768 bytes"),
    ],
)  # fmt: skip
async def test_standard_input_that_cannot_be_a_text_is_refused_and_stores_nothing(
    filled: Filled, args: tuple[str, ...], stdin: str | bytes, message: str
):
    before = await filled.client.knowledge_list("agent-1")

    refused = await run(filled, "knowledge", *args, stdin=stdin)

    assert (refused.code, refused.out, refused.err.count("\n")) == (2, "", 1), refused.err
    assert message in refused.err
    assert await filled.client.knowledge_list("agent-1") == before


async def test_a_dash_on_a_terminal_says_to_pipe_the_text_in(filled: Filled):
    before = await filled.client.knowledge_list("agent-1")

    code, shown = await asyncio.to_thread(
        choirctl_on_tty, filled.home.root, "knowledge", "add", "agent-1", "-", typed=""
    )

    assert code == 2
    assert "text - is read from standard input, which is a terminal: pipe the text in" in shown
    assert await filled.client.knowledge_list("agent-1") == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("add", "agent-1", "x", "--name", "daily"), "cannot use 'daily' as name: it is an alias"),
        (("rename", "agent-1", "other", "standup"), "it is the name of another item"),
        (("alias", "agent-1", "other", "daily"), "it is an alias of 'standup'"),
        (("restore", "agent-1", "standup", "9"), "has no version 9; it has versions 1 to 1"),
    ],
)  # fmt: skip
async def test_a_taken_name_exits_5_and_changes_nothing(
    filled: Filled, args: tuple[str, ...], message: str
):
    await filled.client.knowledge_add("agent-1", "standup is at nine", name="standup")
    await filled.client.knowledge_alias("agent-1", "standup", "daily")
    await filled.client.knowledge_add("agent-1", "another note", name="other")
    before = await filled.client.knowledge_list("agent-1")

    refused = await run(filled, "knowledge", *args)

    assert refused.code == (4 if args[0] == "restore" else 5), refused.err
    assert (refused.out, refused.err.count("\n")) == ("", 1)
    assert refused.err.startswith("error: ")
    assert message in refused.err
    assert await filled.client.knowledge_list("agent-1") == before


async def test_knowledge_relevance_search(filled: Filled):
    await run(filled, "knowledge", "put", "agent-1", "standup is at nine", "--key", "standup")
    asked = (
        "memory",
        "search",
        "agent-1",
        "standup",
        "--store",
        "knowledge",
        "--mode",
        "relevance",
    )
    found = await run(filled, *asked)
    data = (await run(filled, *asked, "--json")).json()
    session = await run(filled, "memory", "search", "agent-1", "x", "--mode", "relevance")

    assert (found.code, found.err) == (0, "")
    assert found.out.splitlines()[0] == "agent-1's knowledge memory, relevance search: 1 hit(s)"
    assert (data["mode"], data["fallback"]) == ("relevance", None)
    assert [hit["name"] for hit in data["hits"]] == ["standup"]
    assert 0 < data["hits"][0]["score"] <= 1.1
    assert session.code == 2
    assert "unknown search mode 'relevance' for store session: use semantic" in session.err
