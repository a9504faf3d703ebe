"""The knowledge graph through the memory host tools (seed design 003): an agent's
EXECUTE_HOST_TOOL → a real choird → Postgres. loc, type, tags and data on add/write/put, link
and unlink, filtered queries, neighbours, and every refusal as the one-line error the model sees
with nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from choir.daemon.app import ChoirDaemon
from tests.daemon.test_memory_tools import as_agent, daemon, home, query, upsert

pytestmark = pytest.mark.slow
__all__ = ["daemon", "home"]  # the fixtures this module borrows


def names(result: dict[str, Any]) -> list[str]:
    assert result["status"] == "success", result
    return [hit["name"] for hit in result["data"]["hits"]]


async def test_items_carry_loc_type_tags_data_and_typed_edges(daemon: ChoirDaemon) -> None:
    agent = await as_agent(daemon, "agent-1")
    added = await upsert(
        agent,
        op="add",
        name="deploy.old",
        text="Deploys go to castor.",
        loc="projects:choir:ops",
        type="record",
        tags=["deploy"],
        data={"host": "castor"},
    )
    assert added["status"] == "success", added
    assert (added["data"]["loc"], added["data"]["type"], added["data"]["tags"]) == (
        "projects:choir:ops",
        "record",
        ["deploy"],
    )
    await upsert(
        agent,
        op="put",
        name="deploy.new",
        text="Deploys go to pollux.",
        loc="projects:choir:ops",
        tags=["deploy", "current"],
    )
    await upsert(
        agent, op="add", name="elsewhere", text="Deploys of the blog go to vega.", loc="blog"
    )
    moved = await upsert(agent, op="write", name="deploy.old", data={"host": "castor", "old": True})
    assert (moved["status"], moved["data"]["version"]) == ("success", 2)  # no text: kept

    linked = await upsert(
        agent, op="link", name="deploy.new", target="deploy.old", edge="supersedes"
    )
    assert (linked["status"], linked["data"]["new"]) == ("success", True)
    assert "'deploy.new' supersedes 'deploy.old'" in linked["summary"]

    subtree = await query(
        agent, store="knowledge", mode="text", query="deploys", loc="projects:choir"
    )
    assert sorted(names(subtree)) == ["deploy.new", "deploy.old"]
    assert "(loc=projects:choir)" in subtree["summary"]
    hit = next(h for h in subtree["data"]["hits"] if h["name"] == "deploy.new")
    assert (hit["loc"], hit["type"], hit["tags"]) == (
        "projects:choir:ops",
        "info",
        ["deploy", "current"],
    )
    tagged = await query(
        agent, store="knowledge", mode="text", query="deploys", tags=["deploy", "current"]
    )
    assert names(tagged) == ["deploy.new"]
    records = await query(agent, store="knowledge", mode="text", query="deploys", type="record")
    assert names(records) == ["deploy.old"]

    around = await query(agent, store="knowledge", mode="neighbours", query="deploy.old")
    assert around["status"] == "success", around
    assert around["data"]["item"]["data"] == {"host": "castor", "old": True}
    [neighbour] = around["data"]["neighbours"]
    assert (neighbour["name"], neighbour["edge"], neighbour["direction"]) == (
        "deploy.new",
        "supersedes",
        "in",
    )
    none = await query(
        agent, store="knowledge", mode="neighbours", query="deploy.old", edge_types=["relates_to"]
    )
    assert none["data"]["neighbours"] == []

    unlinked = await upsert(agent, op="unlink", name="deploy.new", target="deploy.old")
    assert (unlinked["status"], unlinked["data"]["removed"]) == ("success", 1)
    await agent.close()


@pytest.mark.parametrize(
    ("arguments", "code", "says"),
    [
        (
            {"op": "link", "name": "fact", "target": "ghost", "edge": "relates_to"},
            "not_found",
            "no knowledge item named 'ghost'",
        ),
        (
            {"op": "link", "name": "ghost", "target": "fact", "edge": "relates_to"},
            "not_found",
            "no knowledge item named 'ghost'",
        ),
        (
            {"op": "link", "name": "fact", "target": "fact", "edge": "relates_to"},
            "invalid_input",
            "to itself",
        ),
        (
            {"op": "link", "name": "fact", "target": "other", "edge": "likes"},
            "invalid_input",
            "unknown edge type 'likes'",
        ),
        ({"op": "link", "name": "fact", "target": "other"}, "invalid_input", "needs edge"),
        (
            {"op": "unlink", "name": "fact", "target": "other"},
            "not_found",
            "no edge from 'fact' to 'other'",
        ),
        (
            {"op": "write", "name": "fact", "text": "changed", "loc": "Bad Loc"},
            "invalid_input",
            "the segment 'Bad Loc'",
        ),
        (
            {"op": "write", "name": "fact", "text": "changed", "type": "note"},
            "invalid_input",
            "unknown knowledge type 'note'",
        ),
        (
            {"op": "write", "name": "fact", "text": "changed", "data": ["a"]},
            "invalid_input",
            "data must be a JSON object",
        ),
        (
            {"op": "write", "name": "fact", "text": "changed", "data": {"x": "y" * 20_000}},
            "invalid_input",
            "over the limit",
        ),
        (
            {"op": "write", "name": "fact", "text": "changed", "tags": ["a b"]},
            "invalid_input",
            "tag 'a b' is not a label",
        ),
        (
            {"op": "write", "name": "ghost", "loc": "a"},
            "not_found",
            "no knowledge item named 'ghost'",
        ),
        ({"op": "write", "name": "fact"}, "invalid_input", "op write needs text"),
    ],
)
async def test_bad_graph_input_is_one_line_for_the_model_and_nothing_is_written(
    daemon: ChoirDaemon, arguments: dict[str, Any], code: str, says: str
) -> None:
    agent = await as_agent(daemon, "agent-1")
    await upsert(agent, op="add", name="fact", text="The fact.", loc="a")
    await upsert(agent, op="add", name="other", text="Another fact.")

    refused = await upsert(agent, **arguments)

    assert (refused["status"], refused["error_code"]) == ("error", code), refused
    assert says in refused["summary"]
    assert "\n" not in refused["summary"]
    around = await query(agent, store="knowledge", mode="neighbours", query="fact")
    assert (around["data"]["item"]["loc"], around["data"]["neighbours"]) == ("a", [])
    found = await query(agent, store="knowledge", mode="text", query="fact", loc="a")
    assert [hit["text"] for hit in found["data"]["hits"]] == ["The fact."]
    await agent.close()


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"loc": "a::b"}, "has an empty segment"),
        ({"type": "note"}, "unknown knowledge type"),
        ({"tags": "deploy"}, "tags must be a list"),
        ({"mode": "neighbours", "query": "ghost"}, "no knowledge item named 'ghost'"),
        ({"mode": "neighbours", "query": "fact", "edge_types": ["likes"]}, "unknown edge type"),
        ({"store": "session", "loc": "a"}, "filter the knowledge store only"),
    ],
)
async def test_bad_graph_queries_are_refused_clearly(
    daemon: ChoirDaemon, arguments: dict[str, Any], says: str
) -> None:
    agent = await as_agent(daemon, "agent-1")
    await upsert(agent, op="add", name="fact", text="The fact.")
    asked = {"store": "knowledge", "mode": "text", "query": "fact"} | arguments

    refused = await query(agent, **asked)

    assert refused["status"] == "error", refused
    assert says in refused["summary"]
    await agent.close()
