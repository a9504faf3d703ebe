"""The summary tree's root end to end (design 004): a real agent on the process runtime with the
scripted model, idle, rolls up the session summaries of its earlier sessions with its own model;
choird stores the roll-up once, linked derived_from the summaries, found by search, opened by
name and not changeable. A user message arriving while the roll-up's model call is in flight is
answered at once: the roll-up is cancelled and written at the next idle period. A failing model
(an HTTP 500, an empty answer) is retried when idle again, and the user is told nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.core.memory.summaries.rollup import ROLLUP_MARKER
from choir.daemon.memory.search.query import MemoryQuery
from choir.errors import ChoirError, ConflictError
from choir.protocol.log.events import SessionSummary
from choir.scripted import RawStep, ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_agent_process import Agent, choir_root, running_agent
from tests.harness.daemons import poll_until, pool_of, stored_events
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.memory.close.support import store_ended_session, wait_closed
from tests.memory.close.test_archive_faults import NAME, SESSION, compacted

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

BRANCH = f"summary/{SESSION.removeprefix('s-')}"
ROLLUP_TEXT = "Across sessions the user asked how the deploy script works (rolled-mark)."
SCRIPT = Script(
    steps=[
        ReplyStep(match=ROLLUP_MARKER, repeat=True, text=ROLLUP_TEXT),
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text='{"summary": "Said hello."}'),
        ReplyStep(match="hello", repeat=True, text="Hello from the script."),
    ]
)

Start = Callable[..., Awaitable[Agent]]


@pytest.fixture
async def start(root: Path, pg_params: ConnectParams) -> AsyncIterator[Start]:
    """choird and agent-1 with `script` as its model, `config` keys applied, over a database
    holding an earlier, stopped session of agent-1 (a compaction and its summary) that choird
    closes into the tree's leaf and branch when it starts."""
    async with contextlib.AsyncExitStack() as stack:

        async def launch(script: Script, **config: Any) -> Agent:
            conn = await connect(pg_params)
            try:
                await apply_control_schema(conn)
                summary = SessionSummary(summary="The user asked how the deploy script works.")
                await store_ended_session(conn, SESSION, [*compacted(), summary])
            finally:
                await conn.close()
            model = await stack.enter_async_context(ScriptedModelServer(script))
            home = make_home(root, postgres=external_postgres(pg_params), **config)
            data = read_config(home)
            data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
            write_config(home, data)
            workspace = root / "ws"
            workspace.mkdir()
            return await stack.enter_async_context(
                running_agent(home, root, model, workspace, tree=choir_root(root))
            )

        yield launch


def rollup_requests(agent: Agent) -> list[dict[str, Any]]:
    return [r.body for r in agent.model.requests if ROLLUP_MARKER in json.dumps(r.body)]


async def rollups(agent: Agent) -> list[dict[str, Any]]:
    events = await stored_events(agent.daemon, agent.session_id)
    return [e.payload for e in events if e.event_type == "memory_rollup"]


async def shown_edges(agent: Agent, name: str) -> list[str]:
    shown = await agent.operator.knowledge_show("agent-1", name)
    return [e.name for e in shown.edges or () if e.edge == "derived_from" and e.direction == "out"]


async def test_an_idle_agent_rolls_up_its_session_summaries_once_into_the_trees_root(
    start: Start,
) -> None:
    agent = await start(SCRIPT, rollup_idle_s=1)
    await wait_closed(pool_of(agent.daemon), SESSION, within=60)

    async def rolled() -> bool:
        return bool(await rollups(agent))

    await poll_until(rolled, within=60)
    [event] = await rollups(agent)
    assert event["covers"] == [BRANCH]
    assert event["text"] == ROLLUP_TEXT
    name = event["name"]
    [request] = rollup_requests(agent)[:1]
    assert "The user asked how the deploy script works." in json.dumps(request)  # the summary

    async def stored() -> bool:
        try:
            await agent.operator.knowledge_show("agent-1", name)
        except ChoirError:
            return False
        return True

    await poll_until(stored, within=30)
    shown = await agent.operator.knowledge_show("agent-1", name)
    assert ROLLUP_TEXT in shown.text
    assert shown.metadata["memory_rollup"]["covers"] == [BRANCH]
    assert await shown_edges(agent, name) == [BRANCH]  # root -> branch
    assert await shown_edges(agent, BRANCH) == [NAME]  # branch -> leaf
    stats = await agent.operator.memory_stats("agent-1")
    assert stats.agents[0].tree_depth == 3

    store = agent.daemon.memory_store
    assert store is not None
    hits = await store.search("agent-1", MemoryQuery(store="knowledge", mode="text", text="rolled"))
    assert [hit.text for hit in hits if "rolled-mark" in hit.text]
    with pytest.raises(ConflictError, match="archives are immutable"):
        await agent.operator.knowledge_delete("agent-1", name)

    await asyncio.sleep(3)  # three more idle periods: nothing left to roll up
    assert len(await rollups(agent)) == 1
    assert len(rollup_requests(agent)) == 1
    assert await store.pending_summaries("agent-1", 20, user="console") == []


async def test_a_message_during_the_rollup_is_answered_at_once_and_the_rollup_waits(
    start: Start,
) -> None:
    slow = Script(
        steps=[
            ReplyStep(match=ROLLUP_MARKER, delay_ms=30_000, text="never used"),
            *SCRIPT.steps,
        ]
    )
    agent = await start(slow, rollup_idle_s=1)
    await wait_closed(pool_of(agent.daemon), SESSION, within=60)

    async def asked() -> bool:
        return bool(rollup_requests(agent))

    await poll_until(asked, within=60)  # the roll-up's model call is in flight
    began = time.monotonic()
    replies = await agent.chat("hello")
    took = time.monotonic() - began
    assert replies[-1]["text"] == "Hello from the script."
    assert took < 25, took  # not held up by the 30 s roll-up call: it was cancelled
    assert await rollups(agent) == []

    async def rolled() -> bool:
        return bool(await rollups(agent))

    await poll_until(rolled, within=60)  # the next idle period wrote it
    [event] = await rollups(agent)
    assert (event["text"], event["covers"]) == (ROLLUP_TEXT, [BRANCH])
    events = await stored_events(agent.daemon, agent.session_id)
    kinds = [e.event_type for e in events]
    assert kinds.index("agent_replied") < kinds.index("memory_rollup")


async def test_a_failing_model_is_retried_at_the_next_idle_period_and_the_user_sees_nothing(
    start: Start,
) -> None:
    failing = Script(
        steps=[
            RawStep(match=ROLLUP_MARKER, status=500, body='{"error": {"message": "down"}}'),
            ReplyStep(match=ROLLUP_MARKER, text="   "),  # nothing written: retried too
            *SCRIPT.steps,
        ]
    )
    agent = await start(failing, rollup_idle_s=1)
    await wait_closed(pool_of(agent.daemon), SESSION, within=60)

    async def rolled() -> bool:
        return bool(await rollups(agent))

    await poll_until(rolled, within=90)
    [event] = await rollups(agent)
    assert event["text"] == ROLLUP_TEXT
    assert len(rollup_requests(agent)) >= 3  # the 500, the empty answer, the roll-up
    events = await stored_events(agent.daemon, agent.session_id)
    assert [e for e in events if e.event_type == "agent_replied"] == []  # nothing told the user
