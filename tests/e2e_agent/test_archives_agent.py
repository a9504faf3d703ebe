"""Compaction archives end to end: the real agent folds its window with the scripted model,
choird stores the archive its event names, the operator opens it by name (what `choirctl
knowledge show` asks) and cannot change it, a search finds it, and the lane's later prompts
carry the marker naming it."""

from __future__ import annotations

import asyncio
import json

import pytest

from choir.daemon.memory.search.query import MemoryQuery
from choir.errors import ChoirError, ConflictError
from tests.e2e_agent.test_lanes import (
    FOLD_MARK,
    MEMORY_SCRIPT,
    Launch,
    durable,
    launch,
    system_texts,
)
from tests.harness.daemons import poll_until, stored_events

pytestmark = pytest.mark.slow

__all__ = ["launch"]  # the fixture, shared with test_lanes


async def test_a_compaction_leaves_an_immutable_archive_found_by_name_and_by_search(
    launch: Launch,
) -> None:
    agent = await launch(MEMORY_SCRIPT, event_window_size=4)
    for n in range(3):
        await agent.chat(f"hello {n}")
    await durable(agent, "memory_write_committed")
    events = await stored_events(agent.daemon, agent.session_id)
    [write, *_] = [e for e in events if e.event_type == "memory_write_committed"]
    archive = write.payload["archive"]
    name = archive["name"]
    assert (
        name
        == f"archive/{agent.session_id.removeprefix('s-')}/{write.payload['window_start_rev'] - 1}"
    )
    assert write.payload["delta"]["summary_update"].endswith(f"[archived as {name}]")

    async def stored() -> bool:
        try:
            await agent.operator.knowledge_show("agent-1", name)
        except ChoirError:
            return False
        return True

    await poll_until(stored, within=30)
    shown = await agent.operator.knowledge_show("agent-1", name)
    assert "The user greeted (folded-mark)." in shown.text
    assert "[archived as" not in shown.text
    assert f"archived {archive['archived_at']}" in shown.text
    assert shown.metadata["compaction_archive"]["session_id"] == agent.session_id

    with pytest.raises(ConflictError, match="archives are immutable"):  # choirctl: exit 5
        await agent.operator.knowledge_delete("agent-1", name)
    with pytest.raises(ConflictError, match="archives are immutable"):
        await agent.operator.knowledge_rename("agent-1", name, "mine-now")

    store = agent.daemon.memory_store
    assert store is not None
    hits = await store.search(
        "agent-1", MemoryQuery(store="knowledge", mode="text", text="greeted")
    )
    assert any("folded-mark" in hit.text for hit in hits)

    await agent.chat("hello again")
    answers = [
        r.body for r in agent.model.requests if FOLD_MARK not in json.dumps(r.body["messages"])
    ]
    assert f"[archived as {name}]" in system_texts(answers[-1])


async def test_a_stopped_sessions_summary_becomes_the_branch_over_its_archives(
    launch: Launch,
) -> None:
    agent = await launch(MEMORY_SCRIPT, event_window_size=4)
    for n in range(3):
        await agent.chat(f"hello {n}")
    await durable(agent, "memory_write_committed")
    agent.daemon.hub.push(agent.session_id, {"kind": "shutdown", "reason": "stop"})
    assert await asyncio.wait_for(agent.process.wait(), 15) == 0
    branch = f"summary/{agent.session_id.removeprefix('s-')}"

    async def closed() -> bool:
        try:
            await agent.operator.knowledge_show("agent-1", branch)
        except ChoirError:
            return False
        return True

    await poll_until(closed, within=60)
    shown = await agent.operator.knowledge_show("agent-1", branch)
    assert "The user said hello; the agent answered." in shown.text
    assert "user messages" in shown.text
    leaves = [
        e.name for e in shown.edges or () if e.edge == "derived_from" and e.direction == "out"
    ]
    assert leaves
    assert all(
        leaf.startswith(f"archive/{agent.session_id.removeprefix('s-')}/") for leaf in leaves
    )
    stats = await agent.operator.memory_stats("agent-1")
    assert stats.agents[0].tree_depth == 2
