"""What choird derives from a session is its user's (issue 15): a real choird on real Postgres,
the agent side the real `ControlPlane` client calling as leased sessions of two users (two
DMs) of one agent, and a session of another agent granted that agent's knowledge.

A session of alice closes into session memory, a compaction archive, a tool sequence and a
session summary; a later session of alice commits a roll-up over her summary. Bob's session of
the same agent finds none of it — search (text, relevance), per-turn recall, expand, neighbours,
browse, the roll-up tool — nor does agent-2; alice's finds all of it; the operator sees both
users' items, each with its owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from choir.agent.replication.control_plane import ControlPlane
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.search.query import MemoryQuery
from choir.home import ChoirHome
from choir.protocol.log.events import (
    AgentReplied,
    CompactionArchive,
    Event,
    MemoryDelta,
    MemoryRollup,
    MemoryWriteCommitted,
    ModelOutput,
    SessionSummary,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult
from choir.store.postgres.target import ConnectParams
from tests.daemon.test_memory_access_tools import session
from tests.daemon.test_memory_tools import call, query
from tests.harness.daemons import pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.memory.close.support import run_session, wait_closed

pytestmark = pytest.mark.slow

USERS = ("alice", "bob")
WORDS = {"alice": "zanzibar", "bob": "quixote"}
"""A word only that user's conversation holds."""


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    for user in USERS:
        data["dms"][user] = {"gateway": "console", "user_id": user}
    data["agents"]["agent-2"]["memories"] = [
        {"agent": "agent-1", "class": "knowledge", "role": "read"},
    ]
    write_config(home, data)
    return home


@pytest.fixture
async def daemon(home: ChoirHome) -> AsyncIterator[ChoirDaemon]:
    async with running_daemon(home) as running:
        yield running


@asynccontextmanager
async def as_user(daemon: ChoirDaemon, user: str) -> AsyncIterator[ControlPlane]:
    """A leased session of agent-1 bound to `user`'s DM, stopped after (one runs at a time)."""
    assert daemon.services is not None
    plane, session_id = await session(daemon, "agent-1", user)
    try:
        yield plane
    finally:
        await plane.close()
        await daemon.services.sessions.stop(session_id, "test: next user")


def archive_of(user: str) -> str:
    return f"archive/{WORDS[user]}0000/8"


def private_session(user: str) -> list[Event]:
    """A conversation of `user` about their word, folded into an archive at rev 9, a tool call
    naming the word, and the session's summary."""
    word = WORDS[user]
    talk: list[Event] = []
    for turn in range(4):
        talk.append(UserMsg(text=f"turn {turn}: my {word} budget is 40 euros, keep it private."))
        talk.append(AgentReplied(text=f"Noted: your {word} budget, turn {turn}."))
    fold = MemoryWriteCommitted(
        summary_lane="edge",
        delta=MemoryDelta(
            mode="append",
            summary_update=f"The user's {word} budget. [archived as {archive_of(user)}]",
        ),
        window_start_rev=9,
        archive=CompactionArchive(
            name=archive_of(user), folded_from_rev=1, archived_at="2026-11-27T13:52Z"
        ),
    )
    run = ToolCall(id=f"x-{user}", name="choir.exec", arguments={"command": f"grep {word} b.txt"})
    tools: list[Event] = [
        ModelOutput(lane="edge", model="scripted", tool_calls=[run]),
        ToolResultCommitted(
            call_id=run.id,
            tool=run.name,
            result=ToolResult(status="success", summary="exit 0", data={"exit_code": 0}),
        ),
    ]
    summary = SessionSummary(summary=f"The user set their {word} budget to 40 euros.")
    return [*talk, fold, *tools, summary]


def names(result: dict[str, Any]) -> list[str]:
    assert result["status"] == "success", result
    return [hit.get("name") or hit.get("session_id") for hit in result["data"]["hits"]]


def not_found(result: dict[str, Any]) -> None:
    assert (result["status"], result["error_code"]) == ("error", "not_found"), result


async def closed_sessions(daemon: ChoirDaemon) -> dict[str, str]:
    """One closed session per user; {user: session id}."""
    await daemon.memory_started()
    sessions = {user: await run_session(daemon, private_session(user), dm=user) for user in USERS}
    await wait_closed(pool_of(daemon), *sessions.values())
    return sessions


async def test_a_users_session_memory_is_found_by_that_users_sessions_only(
    daemon: ChoirDaemon,
) -> None:
    sessions = await closed_sessions(daemon)
    segment = sessions["alice"].removeprefix("s-")
    tree = {archive_of("alice"), f"summary/{segment}", f"tools/{segment}/11"}

    async with as_user(daemon, "alice") as alice:  # her own sessions find all of it
        found = await query(alice, store="knowledge", mode="text", query="zanzibar")
        assert set(names(found)) == tree
        relevance = await query(alice, store="knowledge", mode="relevance", query="zanzibar")
        assert set(names(relevance)) == tree
        chunks = await query(alice, store="session", mode="text", query="zanzibar")
        assert set(names(chunks)) == {sessions["alice"]}
        down = await query(alice, store="knowledge", mode="expand", query=f"summary/{segment}")
        assert {s["name"] for s in down["data"]["sources"]} == tree - {f"summary/{segment}"}
        events = await query(alice, store="knowledge", mode="expand", query=archive_of("alice"))
        assert events["status"] == "success", events
        assert events["data"]["messages"], events
        page = await query(alice, store="session", mode="browse", session_id=sessions["alice"])
        assert any("zanzibar" in m["text"] for m in page["data"]["messages"]), page
        recalled = await recall(alice, "zanzibar budget")
        assert {i["name"] for i in recalled} & tree, recalled

    async with as_user(daemon, "bob") as bob:  # bob's session of the same agent: none of it
        assert names(await query(bob, store="knowledge", mode="text", query="zanzibar")) == []
        ranked = await query(bob, store="knowledge", mode="relevance", query="zanzibar")
        assert not any("zanzibar" in hit["text"] for hit in ranked["data"]["hits"]), ranked
        assert names(await query(bob, store="session", mode="text", query="zanzibar")) == []
        assert names(await query(bob, store="knowledge", mode="text", query="quixote"))  # his
        for name in tree:
            not_found(await query(bob, store="knowledge", mode="expand", query=name))
            not_found(await query(bob, store="knowledge", mode="neighbours", query=name))
        not_found(await query(bob, store="session", mode="browse", session_id=sessions["alice"]))
        assert not any("zanzibar" in i["text"] for i in await recall(bob, "zanzibar budget"))

    # another agent, granted agent-1's knowledge (and so its session memory): neither user's
    other, _ = await session(daemon, "agent-2")
    for word in WORDS.values():
        theirs = await query(
            other, store="knowledge", mode="text", query=word, target_agent="agent-1"
        )
        assert names(theirs) == []
        rows = await query(other, store="session", mode="text", query=word, target_agent="agent-1")
        assert names(rows) == []
    archive = archive_of("alice")
    not_found(
        await query(other, store="knowledge", mode="expand", query=archive, target_agent="agent-1")
    )
    browse = {"store": "session", "mode": "browse", "session_id": sessions["alice"]}
    not_found(await query(other, target_agent="agent-1", **browse))
    await other.close()

    # the operator sees both users' items and session rows, each with its owner
    store = daemon.memory_store
    assert store is not None
    for user, word in WORDS.items():
        hits = await store.search("agent-1", MemoryQuery(store="knowledge", mode="text", text=word))
        assert {hit.source.owner_user for hit in hits} == {user}
        rows = await store.search("agent-1", MemoryQuery(store="session", mode="text", text=word))
        assert rows
        assert {hit.source.owner_user for hit in rows} == {user}
        about = await store.knowledge_about("agent-1", user, limit=100)
        assert {item.name for item in about} >= {archive_of(user)}
        assert {item.memory_class for item in about} == {"knowledge"}  # not sealed: choird's


async def recall(plane: ControlPlane, text: str) -> list[dict[str, Any]]:
    result = await call(
        plane, "choir.memory.recall", text=text, budget_tokens=2000, deadline_ms=9000
    )
    assert result["status"] == "success", result
    items: list[dict[str, Any]] = result["data"]["items"]
    return items


async def test_rollups_are_per_user_and_private_to_that_user(daemon: ChoirDaemon) -> None:
    sessions = await closed_sessions(daemon)
    branches = {user: f"summary/{sessions[user].removeprefix('s-')}" for user in USERS}

    for user in USERS:  # the roll-up tool lists the calling session's user's summaries only
        async with as_user(daemon, user) as plane:
            pending = await call(plane, "choir.memory.rollup", limit=20)
            assert [s["name"] for s in pending["data"]["summaries"]] == [branches[user]]

    root = "rollup/2026-11-27T14:40Z"
    rollup = MemoryRollup(
        name=root, text="Kilimanjaro: the zanzibar budget.", covers=[branches["alice"]]
    )
    later = await run_session(daemon, [UserMsg(text="hello"), rollup], dm="alice")
    await wait_closed(pool_of(daemon), later)

    async with as_user(daemon, "alice") as alice:
        found = await query(alice, store="knowledge", mode="text", query="kilimanjaro")
        assert names(found) == [root]
        down = await query(alice, store="knowledge", mode="expand", query=root)
        assert [s["name"] for s in down["data"]["sources"]] == [branches["alice"]]
        assert (await call(alice, "choir.memory.rollup", limit=20))["data"]["summaries"] == []

    async with as_user(daemon, "bob") as bob:
        assert names(await query(bob, store="knowledge", mode="text", query="kilimanjaro")) == []
        not_found(await query(bob, store="knowledge", mode="expand", query=root))
        still = await call(bob, "choir.memory.rollup", limit=20)  # bob's is still pending
        assert [s["name"] for s in still["data"]["summaries"]] == [branches["bob"]]

    assert daemon.memory_store is not None
    stored = await daemon.memory_store.get_knowledge("agent-1", root)
    assert (stored.memory_class, stored.owner_user) == ("knowledge", "alice")
