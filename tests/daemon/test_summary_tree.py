"""The summary tree through the memory host tools (seed design 004), a real choird on Postgres:
a session with a compaction and a summary closes into a leaf (its archive) and a branch (its
summary, linked derived_from the archive); a search hit on the branch expands to the archive,
the archive to its source messages with who said them; neither can be changed. A roll-up over
summaries (the root) expands to them; a session's tool calls are a leaf under its summary."""

from __future__ import annotations

from typing import Any

import pytest

from choir.daemon.app import ChoirDaemon
from choir.protocol.log.events import MemoryRollup, SessionSummary, UserMsg
from tests.daemon.test_memory_tools import as_agent, call, daemon, home, query, upsert
from tests.harness.daemons import pool_of
from tests.memory.close.support import run_session, wait_closed
from tests.memory.close.test_archive_faults import NAME, compacted
from tests.memory_ops.test_tool_rows import tool_session

pytestmark = pytest.mark.slow
__all__ = ["daemon", "home"]  # the fixtures this module borrows


def hit_names(result: dict[str, Any]) -> list[str]:
    assert result["status"] == "success", result
    return [hit["name"] for hit in result["data"]["hits"]]


async def test_a_closed_session_becomes_a_branch_over_its_archives_expandable_to_events(
    daemon: ChoirDaemon,
) -> None:
    await daemon.memory_started()
    summary = SessionSummary(
        summary="The user asked about the deploy script; the agent explained it.",
        topics=["deploy"],
        decisions=["keep the blue cluster"],
    )
    session_id = await run_session(daemon, [*compacted(), summary])
    await wait_closed(pool_of(daemon), session_id)
    branch = f"summary/{session_id.removeprefix('s-')}"
    agent = await as_agent(daemon, "agent-1")

    found = await query(agent, store="knowledge", mode="text", query="deploy script")
    assert {branch, NAME} <= set(hit_names(found))
    hit = next(h for h in found["data"]["hits"] if h["name"] == branch)
    assert "6 user messages, 6 agent replies" in hit["text"]  # who said what
    assert f"Compaction archives: {NAME}" in hit["text"]

    down = await query(agent, store="knowledge", mode="expand", query=branch)
    assert down["status"] == "success", down
    assert [source["name"] for source in down["data"]["sources"]] == [NAME]

    events = await query(agent, store="knowledge", mode="expand", query=NAME, limit=50)
    assert events["status"] == "success", events
    revs = [m["rev"] for m in events["data"]["messages"]]
    assert revs == sorted(revs)
    assert 1 <= revs[0] <= revs[-1] <= 8
    assert {m["who"] for m in events["data"]["messages"]} >= {"user"}
    assert "session 0 turn 0" in events["data"]["messages"][0]["text"]

    stats = await query(agent, store="session", mode="stats", query="stats")
    assert stats["data"]["tree_depth"] == 2, stats
    assert "summary tree depth 2" in stats["summary"]
    assert daemon.memory_store is not None
    assert (await daemon.memory_store.stats("agent-1")).tree_depth == 2  # `memory stats`

    refused = await upsert(agent, op="write", name=branch, text="rewritten")
    assert (refused["status"], refused["error_code"]) == ("error", "immutable"), refused
    assert "archives are immutable" in refused["summary"]
    gone = await query(agent, store="knowledge", mode="expand", query="no.such.item")
    assert (gone["status"], gone["error_code"]) == ("error", "not_found"), gone
    assert "no knowledge item named 'no.such.item'" in gone["summary"]


async def test_a_name_held_by_a_note_costs_that_archive_only_and_the_close_completes(
    daemon: ChoirDaemon,
) -> None:
    await daemon.memory_started()
    assert daemon.memory_store is not None
    await daemon.memory_store.add_knowledge(
        "agent-1", "my own note, named like an archive", name=NAME
    )
    session_id = await run_session(daemon, [*compacted(), SessionSummary(summary="Ports.")])
    await wait_closed(pool_of(daemon), session_id)  # the close went on
    agent = await as_agent(daemon, "agent-1")
    note = await query(agent, store="knowledge", mode="expand", query=NAME)
    assert note["data"]["item"]["text"] == "my own note, named like an archive"
    branch = await query(
        agent, store="knowledge", mode="expand", query=f"summary/{session_id.removeprefix('s-')}"
    )
    assert (branch["status"], branch["data"]["sources"]) == ("success", [])


async def test_a_rollup_is_the_root_expanded_to_summaries_then_archives_then_events(
    daemon: ChoirDaemon,
) -> None:
    await daemon.memory_started()
    assert daemon.memory_store is not None
    summary = SessionSummary(summary="The user asked about the deploy script.")
    first = await run_session(daemon, [*compacted(), summary])
    await wait_closed(pool_of(daemon), first)
    branch = f"summary/{first.removeprefix('s-')}"
    pending = await daemon.memory_store.pending_summaries("agent-1", 20, user="console")
    assert [p.name for p in pending] == [branch]
    assert "deploy script" in pending[0].text
    rolled = await daemon.memory_store.pending_summaries(
        "agent-1", 20, user="console", besides=[branch]
    )
    assert rolled == []

    root = "rollup/2026-11-27T14:40Z"
    rollup = MemoryRollup(name=root, text="Across sessions: the deploy script.", covers=[branch])
    later = await run_session(daemon, [UserMsg(text="hello"), rollup])
    await wait_closed(pool_of(daemon), later)
    agent = await as_agent(daemon, "agent-1")

    left = await call(agent, "choir.memory.rollup", limit=20)
    assert (left["status"], left["data"]["summaries"]) == ("success", []), left
    bad = await call(agent, "choir.memory.rollup", limit=0)
    assert (bad["status"], bad["error_code"]) == ("error", "invalid_input"), bad
    assert "limit must be an integer from 1 to 20" in bad["summary"]

    found = await query(
        agent, store="knowledge", mode="text", query="across sessions", loc="rollup"
    )
    assert hit_names(found) == [root]
    down = await query(agent, store="knowledge", mode="expand", query=root)
    assert [source["name"] for source in down["data"]["sources"]] == [branch]
    leaves = await query(agent, store="knowledge", mode="expand", query=branch)
    assert [source["name"] for source in leaves["data"]["sources"]] == [NAME]
    events = await query(agent, store="knowledge", mode="expand", query=NAME, limit=50)
    assert events["data"]["messages"], events

    stats = await query(agent, store="session", mode="stats", query="stats")
    assert stats["data"]["tree_depth"] == 3, stats
    refused = await upsert(agent, op="write", name=root, text="rewritten")
    assert (refused["status"], refused["error_code"]) == ("error", "immutable"), refused


async def test_a_sessions_tool_calls_are_a_leaf_under_its_summary_expandable_to_events(
    daemon: ChoirDaemon,
) -> None:
    await daemon.memory_started()
    session_id = await run_session(daemon, tool_session(0))
    await wait_closed(pool_of(daemon), session_id)
    segment = session_id.removeprefix("s-")
    agent = await as_agent(daemon, "agent-1")

    down = await query(agent, store="knowledge", mode="expand", query=f"summary/{segment}")
    [leaf] = down["data"]["sources"]
    assert leaf["name"] == f"tools/{segment}/6"
    assert leaf["text"].startswith(f"Tool calls of session {session_id}, revs 2-6 (3 calls).")
    assert "rev 4: agent ran `pytest -q` (exit 0)" in leaf["text"]
    found = await query(agent, store="knowledge", mode="text", query="pytest", loc="tools")
    assert hit_names(found) == [leaf["name"]]

    events = await query(agent, store="knowledge", mode="expand", query=leaf["name"], limit=50)
    assert events["status"] == "success", events
    assert (events["data"]["from_rev"], events["data"]["upto_rev"]) == (2, 6)
    assert [m["rev"] for m in events["data"]["messages"]] == sorted(
        m["rev"] for m in events["data"]["messages"]
    )
    refused = await upsert(agent, op="remove", name=leaf["name"])
    assert (refused["status"], refused["error_code"]) == ("error", "immutable"), refused
