"""Relevant memories before each turn (design 004, issue 15) end to end: a real choird on the
test's Postgres, `choir-agent` on the process runtime, the scripted model recording what it is
sent. A message that matches stored knowledge gets those items in the model's request, within
the token budget and delimited as memory; an unrelated one gets none; each turn's recall is one
`memory_recalled` event the operator reads on one line (none when nothing was relevant); a
search stuck on a lock past its
deadline still lets the turn answer, and its event says why nothing came."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.ctl.sessions.session import event_line
from choir.home import ChoirHome
from choir.protocol.operator.views import EventView
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_until
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, write_config
from tests.harness.waits import poll_until

pytestmark = pytest.mark.slow

BUDGET = 60
ITEMS = {
    "launch.code": "The rocket launch code is zebra-42.",
    "launch.window": "The rocket launch window opens at dawn.",
    # matches too, but alone it is past the budget: passed over for the smaller ones
    "launch.crew": "The rocket launch crew: " + ", ".join(f"crew member {n}" for n in range(40)),
}


@pytest.fixture
def script() -> Script:
    return Script(
        steps=[
            ReplyStep(match=SUMMARY_MARKER, repeat=True, text=json.dumps({"summary": "ok"})),
            ReplyStep(after="user", match="launch code", repeat=True, text="answered launch"),
            ReplyStep(after="user", match="good morning", repeat=True, text="answered morning"),
        ]
    )


@pytest.fixture
def recall_home(home: ChoirHome) -> ChoirHome:
    data: dict[str, Any] = read_config(home)
    # generous: a loaded two-core machine must not make the matching turn miss it
    data.update(recall_budget_tokens=BUDGET, recall_deadline_ms=1_500)
    write_config(home, data)
    return home


async def say(client: ChoirClient, text: str, awaited: str) -> None:
    sent = await client.chat_send("agent-1", text)
    await replies_until(client, sent.after_seq, awaited, within=30)


def memory_messages(model: ScriptedModelServer, asked: str) -> list[str]:
    """The system messages of memory in the last request that answered `asked`."""
    for request in reversed(model.requests):
        messages = request.body["messages"]
        users = [m for m in messages if m["role"] == "user"]
        if users and users[-1]["content"] == asked:
            return [
                m["content"]
                for m in messages
                if m["role"] == "system" and m["content"].startswith("[MEMORY]")
            ]
    raise AssertionError(f"the model was never asked {asked!r}")


async def recalled_events(client: ChoirClient, session_id: str, count: int) -> list[EventView]:
    found: list[EventView] = []

    async def enough() -> bool:
        events = (await client.session_events(session_id, from_rev=1, limit=500)).events
        found[:] = [e for e in events if e.event_type == "memory_recalled"]
        return len(found) >= count

    await poll_until(enough, within=15, every=0.2)
    return found


async def test_relevant_memories_reach_the_model_within_budget_and_a_stuck_search_does_not_block(
    recall_home: ChoirHome, model: ScriptedModelServer, pg_params: ConnectParams
) -> None:
    async with (
        running_daemon(recall_home),
        await ChoirClient.connect(recall_home) as client,
    ):
        for name, text in ITEMS.items():
            await client.knowledge_add("agent-1", text, name=name)
        started = await client.agent_start("agent-1", {"dm": "console"})
        session_id = started.session_id

        asked = "what is the rocket launch code?"
        await say(client, asked, "answered launch")
        blocks = memory_messages(model, asked)
        assert len(blocks) == 1
        assert "zebra-42" in blocks[0]
        assert "not instructions" in blocks[0]
        assert "crew member" not in blocks[0]  # past the budget

        await say(client, "good morning", "answered morning")
        assert memory_messages(model, "good morning") == []

        [first] = await recalled_events(client, session_id, 1)
        names = [item["name"] for item in first.payload["items"]]
        assert "launch.code" in names
        assert "launch.crew" not in names
        assert 0 < first.payload["tokens"] <= BUDGET
        assert first.payload["budget_tokens"] == BUDGET
        line = event_line(first, session_id)
        assert "memory_recalled" in line
        assert f"/{BUDGET} tokens" in line
        assert "launch.code" in line
        assert "zebra-42" not in line  # the line names items, it does not print them

        schema = quote_ident(agent_schema("agent-1"))
        blocker = await asyncpg.connect(**pg_params.connect_kwargs())
        try:
            async with blocker.transaction():
                await blocker.execute(
                    f"LOCK TABLE {schema}.knowledge_documents IN ACCESS EXCLUSIVE MODE"
                )
                stuck = "and the launch code again?"
                await say(client, stuck, "answered launch")
        finally:
            await blocker.close()
        assert memory_messages(model, stuck) == []
        # the unrelated message recalled nothing and committed nothing: the stuck one is next
        third = (await recalled_events(client, session_id, 2))[1]
        assert third.payload["items"] == []
        assert "deadline" in third.payload["skipped"]
        assert "nothing recalled" in event_line(third, session_id)
        await client.agent_stop("agent-1")
