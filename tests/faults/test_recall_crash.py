"""kill -9 of an agent between a message's recalled memories and its first LLM call (design
004's relevant context, issue 15): the recall is in the log, so the resumed agent does not
search again — the item counts one access, the event stays the only one for the message — and
edge tells the user to send the message again, as after any crash mid-cycle; the message sent
again is a new turn with its own recall."""

from __future__ import annotations

import asyncpg
import pytest

from choir.scripted import ReplyStep
from choir.store.events import EventRecord
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.target import ConnectParams
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import InvariantChecker, chat_error, checker_for, crash_report
from tests.harness.cluster import probe_step
from tests.harness.daemons import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.serial]

STEPS = [
    ReplyStep(after="user", match="launch code", repeat=True, text="It is zebra-42."),
    probe_step(),
]


async def accesses(pg_params: ConnectParams) -> int:
    schema = quote_ident(agent_schema("agent-1"))
    conn = await asyncpg.connect(**pg_params.connect_kwargs())
    try:
        count = await conn.fetchval(
            f"SELECT coalesce(sum(a.access_count), 0) FROM {schema}.knowledge_documents d "
            f"JOIN {schema}.knowledge_access a ON a.document_id = d.id WHERE d.name = 'launch.code'"
        )
    finally:
        await conn.close()
    return int(count)


async def recalls_of(checker: InvariantChecker, message_id: str) -> list[EventRecord]:
    found = await checker.stored("memory_recalled")
    return [event for event in found if event.payload.get("message_id") == message_id]


@pytest.mark.timeout(90)
async def test_a_kill_after_the_recall_keeps_the_logged_recall_and_searches_nothing_again(
    cluster_of: ClusterOf, pg_params: ConnectParams
) -> None:
    cluster = await cluster_of(
        STEPS, heartbeat_interval_ms=300, crash_detection_threshold_ms=5000, recall_deadline_ms=2000
    )
    await cluster.client.knowledge_add(
        "agent-1", "The rocket launch code is zebra-42.", name="launch.code"
    )
    checker = checker_for(cluster, context="edge.after_recall")
    started = await cluster.start("agent-1", failpoints="edge.after_recall=sleep(5000)")
    session_id = str(started["session_id"])
    conversation = cluster.conversation("agent-1")
    asked = len(cluster.model.requests)
    sent = await conversation.send("what is the launch code?")

    async def recall_durable() -> bool:
        return bool(await checker.stored("memory_recalled"))

    await poll_until(recall_durable, within=20, every=0.1)
    checker.fault("kill -9 of agent-1 at edge.after_recall")
    await cluster.kill("agent-1")
    await checker.reported(crash_report(cluster.client, "agent-1"))
    assert len(cluster.model.requests) == asked  # killed before its LLM call
    assert await accesses(pg_params) == 1

    resumed = await cluster.start("agent-1")
    assert (resumed["session_id"], resumed["resumed"]) == (session_id, True)
    await checker.healthy(lambda: cluster.answers("agent-1"))
    said = await checker.reported(chat_error(conversation, sent))
    assert "please send it again" in said.text
    # the health probe's own message has its recall too: only the one for `sent` counts here
    [recalled] = await recalls_of(checker, sent.message_id)
    assert [item["name"] for item in recalled.payload["items"]] == ["launch.code"]
    assert await accesses(pg_params) == 1  # the resumed agent searched nothing again

    again = await conversation.send("what is the launch code?")
    assert (await conversation.reply_to(again))["text"] == "It is zebra-42."

    async def recalled_again() -> bool:
        return len(await recalls_of(checker, again.message_id)) == 1

    await poll_until(recalled_again, within=10, every=0.1)
    assert await accesses(pg_params) == 2
    await checker.verify(cluster.conversations.values())
