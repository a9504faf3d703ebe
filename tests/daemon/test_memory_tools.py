"""The memory host tools end to end: an agent's EXECUTE_HOST_TOOL → choird → Postgres → back.

A real choird (the production composition root, in this process) on a home `choirctl init`
made, with the local embedder (no embedding configured); the agent side is the real
`ControlPlane` client on the agent's own socket, calling as a leased session — what the
kernel's host bridge sends when a model calls `choir.memory.upsert` or `choir.memory.query`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import ExecuteHostToolRequest
from choir.store.postgres.target import ConnectParams
from tests.e2e.agent_side import hello
from tests.harness.daemons import agent_control_plane, running_daemon
from tests.harness.homes import external_postgres, make_home

pytestmark = pytest.mark.slow

_ids = itertools.count(1)


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


@pytest.fixture
async def daemon(home: ChoirHome) -> AsyncIterator[ChoirDaemon]:
    async with running_daemon(home) as running:
        yield running


async def as_agent(daemon: ChoirDaemon, agent_id: str) -> ControlPlane:
    assert daemon.services is not None
    started = await daemon.services.sessions.start(agent_id, {})
    agent = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id=agent_id
    )
    await agent.init_hello(hello(agent_id, started.session_id))
    return agent


async def call(agent: ControlPlane, tool: str, **arguments: Any) -> dict[str, Any]:
    request = ExecuteHostToolRequest(tool_name=tool, call_id=f"c{next(_ids)}", input=arguments)
    output: dict[str, Any] = (await agent.execute_host_tool(request)).output
    return output


async def upsert(agent: ControlPlane, **arguments: Any) -> dict[str, Any]:
    return await call(agent, "choir.memory.upsert", **arguments)


async def query(agent: ControlPlane, **arguments: Any) -> dict[str, Any]:
    return await call(agent, "choir.memory.query", **arguments)


def texts(result: dict[str, Any]) -> list[str]:
    assert result["status"] == "success", result
    return [hit["text"] for hit in result["data"]["hits"]]


async def test_knowledge_is_written_updated_by_key_found_and_deleted(daemon: ChoirDaemon) -> None:
    agent = await as_agent(daemon, "agent-1")
    stored = await upsert(agent, op="insert", text="The deploy host is castor.", tags=["ops"])
    assert stored["status"] == "success"
    await upsert(agent, op="update", key="user.editor", text="The user edits with vim.")
    await upsert(agent, op="update", key="user.editor", text="The user edits with emacs.")
    # an old tool definition's insert with a key replaces the keyed entry, as it always did
    await upsert(agent, op="insert", key="user.editor", text="The user edits with helix.")

    found = await query(agent, store="knowledge", mode="text", query="edits")
    assert texts(found) == ["The user edits with helix."]  # updated in place, not added
    [hit] = found["data"]["hits"]
    assert (hit["agent"], hit["store"], hit["name"]) == ("agent-1", "knowledge", "user.editor")
    assert isinstance(hit["score"], float)
    # semantic search embeds the query with the local model; the item's vector may still be
    # queued, so hybrid (text + vector) is what finds it at once either way
    hybrid = await query(agent, store="knowledge", mode="hybrid", query="deploy host")
    assert "The deploy host is castor." in texts(hybrid)

    deleted = await upsert(agent, op="delete", key="user.editor")
    assert deleted["status"] == "success"
    assert texts(await query(agent, store="knowledge", mode="text", query="edits")) == []
    again = await upsert(agent, op="delete", key="user.editor")
    assert (again["status"], again["error_code"]) == ("error", "not_found")
    await agent.close()


async def test_the_closed_set_names_aliases_and_refusals_reach_the_model(
    daemon: ChoirDaemon,
) -> None:
    agent = await as_agent(daemon, "agent-1")
    added = await upsert(agent, op="add", name="editor", text="The user edits with vim.")
    assert (added["status"], added["data"]["name"], added["data"]["version"]) == (
        "success",
        "editor",
        1,
    )
    unnamed = await upsert(agent, op="add", text="Standup is at nine.")
    assert unnamed["data"]["name"].startswith("standup-is-at-nine-")
    aliased = await upsert(agent, op="alias", name="editor", alias="user.editor")
    assert aliased["data"]["aliases"] == ["user.editor"]
    written = await upsert(agent, op="write", name="user.editor", text="The user edits with helix.")
    assert (written["data"]["name"], written["data"]["version"]) == ("editor", 2)
    renamed = await upsert(agent, op="rename", name="editor", new_name="user.preferred.editor")
    assert renamed["data"]["name"] == "user.preferred.editor"

    refusals = [
        ({"op": "add", "name": "user.editor", "text": "x"}, "name_taken", "an alias of"),
        ({"op": "rename", "name": unnamed["data"]["name"], "new_name": "user.editor"},
         "name_taken", "an alias of 'user.preferred.editor'"),
        ({"op": "alias", "name": unnamed["data"]["name"], "alias": "user.preferred.editor"},
         "name_taken", "the name of another item"),
        ({"op": "write", "name": "editor", "text": "x"}, "not_found", "'editor'"),
        ({"op": "remove", "name": "editor"}, "not_found", "'editor'"),
    ]  # fmt: skip
    for arguments, code, needle in refusals:
        refused = await upsert(agent, **arguments)
        assert (refused["status"], refused["error_code"]) == ("error", code), refused
        assert needle in refused["summary"], refused
    found = await query(agent, store="knowledge", mode="text", query="edits")
    assert texts(found) == ["The user edits with helix."]
    assert found["data"]["hits"][0]["name"] == "user.preferred.editor"

    removed = await upsert(agent, op="remove", name="user.editor")  # by its alias
    assert removed["status"] == "success"
    assert texts(await query(agent, store="knowledge", mode="text", query="edits")) == []
    await agent.close()


async def test_another_agents_memory_is_read_never_written(daemon: ChoirDaemon) -> None:
    one = await as_agent(daemon, "agent-1")
    two = await as_agent(daemon, "agent-2")
    await upsert(two, op="insert", text="agent-2 keeps the release checklist.")

    read = await query(
        one, store="knowledge", mode="text", query="checklist", target_agent="agent-2"
    )
    assert texts(read) == ["agent-2 keeps the release checklist."]
    assert read["data"]["hits"][0]["agent"] == "agent-2"
    assert texts(await query(one, store="knowledge", mode="text", query="checklist")) == []

    denied = await upsert(one, op="insert", text="sneaky", target_agent="agent-2")
    assert (denied["status"], denied["error_code"]) == ("error", "access_denied")
    unknown = await query(one, store="knowledge", mode="text", query="x", target_agent="nobody")
    assert (unknown["status"], unknown["error_code"]) == ("error", "unknown_agent")
    assert "agent-1, agent-2" in unknown["summary"]
    assert texts(await query(two, store="knowledge", mode="text", query="sneaky")) == []
    await one.close()
    await two.close()


@pytest.mark.parametrize(
    ("tool", "arguments", "needle"),
    [
        ("choir.memory.query", {"store": "session", "mode": "keyword", "query": "x"}, "keyword"),
        ("choir.memory.query", {"store": "attic", "mode": "text", "query": "x"}, "attic"),
        ("choir.memory.query", {"store": "session", "mode": "session_detail"}, "session_id"),
        ("choir.memory.query", {"store": "knowledge", "mode": "text", "limit": 0}, "limit"),
        ("choir.memory.upsert", {"op": "update", "text": "no key"}, "needs the name"),
        ("choir.memory.upsert", {"op": "rename", "name": "x"}, "new_name is missing"),
        ("choir.memory.upsert", {"op": "add", "text": "x", "name": " x"}, "surrounding spaces"),
        ("choir.memory.upsert", {"op": "insert"}, "text is missing"),
        ("choir.memory.upsert", {"op": "merge", "text": "x"}, "unknown op"),
        ("choir.memory.upsert", {"op": "insert", "text": "x" * 40_000}, "KiB"),
    ],
)
async def test_a_bad_call_is_a_clear_tool_error_and_writes_nothing(
    daemon: ChoirDaemon, tool: str, arguments: dict[str, Any], needle: str
) -> None:
    agent = await as_agent(daemon, "agent-1")
    result = await call(agent, tool, **arguments)
    assert (result["status"], result["error_code"]) == ("error", "invalid_input"), result
    assert needle in result["summary"]
    await asyncio.wait_for(daemon.memory_started(), 30)
    assert daemon.memory_store is not None
    assert (await daemon.memory_store.stats("agent-1")).knowledge_items == 0
    await agent.close()


async def test_relevance_search_with_kinds_and_use_counted(daemon: ChoirDaemon) -> None:
    agent = await as_agent(daemon, "agent-1")
    fact = await upsert(agent, op="add", name="host", text="The deploy host is castor.")
    fix = await upsert(
        agent, op="add", name="host.fix", kind="correction",
        text="Correction: the deploy host is pollux now, not castor.",
    )  # fmt: skip
    bad = await upsert(agent, op="put", name="x", text="Maybe castor.", kind="rumour")
    assert (fact["status"], fix["status"]) == ("success", "success")
    assert (bad["status"], bad["error_code"]) == ("error", "invalid_input")
    assert "unknown knowledge kind 'rumour'" in str(bad)

    found = await query(agent, store="knowledge", mode="relevance", query="deploy host castor")
    assert found["data"]["mode"] == "relevance"
    assert sorted(texts(found)) == sorted(
        ["The deploy host is castor.", "Correction: the deploy host is pollux now, not castor."]
    )
    assert daemon.database is not None
    async with daemon.database.pool.acquire() as conn:
        counts = await conn.fetch(
            'SELECT access_count FROM "choir_agent-1".knowledge_access ORDER BY access_count'
        )
        kinds = await conn.fetch(
            'SELECT name, kind FROM "choir_agent-1".knowledge_documents ORDER BY name'
        )
    assert [row["access_count"] for row in counts] == [1, 1]
    assert [(row["name"], row["kind"]) for row in kinds] == [
        ("host", "fact"),
        ("host.fix", "correction"),
    ]
