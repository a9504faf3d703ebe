"""`choirctl knowledge` with the knowledge graph (seed design 003), as an operator runs it: the
real CLI in a subprocess against a real choird. loc, type, tags and data on writes; link and
unlink; filters on `knowledge list` and `memory search`; `show` with edges; every refusal one
line on stderr with its exit code, nothing written."""

from __future__ import annotations

import pytest

from choir.protocol.operator import answers as a

from .conftest import Filled
from .test_memory_choirctl import fields, run


async def test_graph_fields_edges_and_filters(filled: Filled) -> None:
    added = await run(
        filled, "knowledge", "add", "agent-1", "deploys go to castor", "--name", "deploy.old",
        "--loc", "projects:choir:ops", "--type", "record", "--tag", "deploy",
        "--data", '{"host": "castor"}',
    )  # fmt: skip
    await run(
        filled, "knowledge", "put", "agent-1", "deploys go to pollux", "--name", "deploy.new",
        "--loc", "projects:choir:ops", "--tag", "deploy", "--tag", "current",
    )  # fmt: skip
    await run(filled, "knowledge", "add", "agent-1", "blog deploys go to vega", "--name", "blog",
              "--loc", "blog")  # fmt: skip
    linked = await run(filled, "knowledge", "link", "agent-1", "deploy.new", "supersedes",
                       "deploy.old")  # fmt: skip
    twice = await run(filled, "knowledge", "link", "agent-1", "deploy.new", "supersedes",
                      "deploy.old", "--json")  # fmt: skip
    moved = await run(filled, "knowledge", "write", "agent-1", "deploy.old", "--data",
                      '{"host": "castor", "retired": true}')  # fmt: skip
    shown = await run(filled, "knowledge", "show", "agent-1", "deploy.old")
    shown_json = (await run(filled, "knowledge", "show", "agent-1", "deploy.new", "--json")).json()
    subtree = await run(filled, "knowledge", "list", "agent-1", "--loc", "projects:choir")
    tagged = (
        await run(
            filled, "knowledge", "list", "agent-1", "--tag", "deploy", "--tag", "current", "--json"
        )
    ).json()
    records = (
        await run(filled, "knowledge", "list", "agent-1", "--type", "record", "--json")
    ).json()
    found = (
        await run(
            filled,
            "memory",
            "search",
            "agent-1",
            "deploys",
            "--store",
            "knowledge",
            "--mode",
            "text",
            "--loc",
            "projects",
            "--json",
        )
    ).json()
    history = (await run(filled, "knowledge", "history", "agent-1", "deploy.old", "--json")).json()

    assert (added.code, added.err) == (0, "")
    assert linked.out == "linked: deploy.new supersedes deploy.old\n"
    assert set(twice.json()) == fields(a.KnowledgeLinked)
    assert twice.json()["new"] is False
    assert moved.out == "wrote version 2 of deploy.old in agent-1's knowledge; embedded\n"
    assert "loc       projects:choir:ops" in shown.out
    assert "type      record" in shown.out
    assert "tags      deploy" in shown.out
    assert 'data      {"host":"castor","retired":true}' in shown.out.replace(": ", ":").replace(
        ", ", ","
    )
    assert "edge      deploy.new supersedes this" in shown.out
    assert shown.out.endswith("text:\ndeploys go to castor\n")  # a write of data only
    assert (shown_json["loc"], shown_json["type"], shown_json["tags"]) == (
        "projects:choir:ops",
        "info",
        ["deploy", "current"],
    )
    assert shown_json["edges"] == [
        {"edge": "supersedes", "direction": "out", "name": "deploy.old",
         "id": shown_json["edges"][0]["id"]},
    ]  # fmt: skip
    assert [line.split()[0] for line in subtree.out.splitlines()[1:]] == [
        "deploy.old",
        "deploy.new",
    ]
    assert [item["name"] for item in tagged["items"]] == ["deploy.new"]
    assert [item["name"] for item in records["items"]] == ["deploy.old"]
    assert sorted(hit["name"] for hit in found["hits"]) == ["deploy.new", "deploy.old"]
    assert {hit["loc"] for hit in found["hits"]} == {"projects:choir:ops"}
    assert [(v["version"], v["data"]) for v in history["versions"]] == [
        (2, {"host": "castor", "retired": True}),
        (1, {"host": "castor"}),
    ]

    unlinked = await run(filled, "knowledge", "unlink", "agent-1", "deploy.new", "deploy.old")
    assert unlinked.out == "removed 1 edge(s) from deploy.new to deploy.old\n"
    deleted = await run(filled, "knowledge", "delete", "agent-1", "deploy.new")
    assert deleted.code == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("link", "agent-1", "fact", "relates_to", "ghost"), 4, "no knowledge item named 'ghost'"),
        (("link", "agent-1", "ghost", "relates_to", "fact"), 4, "no knowledge item named 'ghost'"),
        (("link", "agent-1", "fact", "likes", "other"), 2, "unknown edge type 'likes'"),
        (("link", "agent-1", "fact", "relates_to", "fact"), 2, "to itself"),
        (("unlink", "agent-1", "fact", "other"), 4, "no edge from 'fact' to 'other'"),
        (("add", "agent-1", "x", "--loc", "a::b"), 2, "has an empty segment"),
        (("add", "agent-1", "x", "--type", "note"), 2, "unknown knowledge type 'note'"),
        (("add", "agent-1", "x", "--tag", "two words"), 2, "tag 'two words' is not a label"),
        (("add", "agent-1", "x", "--data", "[1]"), 2, "--data must be a JSON object"),
        (("add", "agent-1", "x", "--data", "{nope"), 2, "--data is not JSON"),
        (("put", "agent-1", "x", "--data", '{"a": "' + "y" * 17_000 + '"}'), 2, "over the limit"),
        (("write", "agent-1", "fact", "changed", "--loc", "Bad"), 2, "the segment 'Bad'"),
        (("write", "agent-1", "fact"), 2, "give the new text, or tags, loc, type, data or kind"),
        (("list", "agent-1", "--loc", "a::b"), 2, "has an empty segment"),
        (("list", "agent-1", "--type", "note"), 2, "unknown knowledge type"),
    ],
)  # fmt: skip
async def test_bad_graph_input_exits_non_zero_in_one_line_and_writes_nothing(
    filled: Filled, args: tuple[str, ...], code: int, message: str
) -> None:
    await filled.client.knowledge_add("agent-1", "a fact", name="fact", fields={"loc": "a"})
    await filled.client.knowledge_add("agent-1", "another fact", name="other")
    before = await filled.client.knowledge_list("agent-1")
    edges_before = (await filled.client.knowledge_show("agent-1", "fact")).edges

    refused = await run(filled, "knowledge", *args)

    assert refused.code == code, refused.err
    assert (refused.out, refused.err.count("\n")) == ("", 1)
    assert refused.err.startswith("error: ")
    assert message in refused.err
    assert await filled.client.knowledge_list("agent-1") == before
    assert (await filled.client.knowledge_show("agent-1", "fact")).edges == edges_before == []
