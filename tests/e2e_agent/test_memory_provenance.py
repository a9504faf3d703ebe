"""Provenance of knowledge, end to end: the demo model told to remember calls
`choir.memory.upsert`; the item then knows its agent, session, revision, tool call and user, and
`knowledge.source` opens the user message and the call from the session's event log.

A real choird in the test process on a home `choirctl init` made (its demo model served by
choir-agent itself), the test session's Postgres, the real `choir-agent` on the process runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.protocol.operator import answers as a
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_until
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.harness.waits import poll_until

pytestmark = pytest.mark.slow


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


async def test_an_agents_write_opens_its_message_and_tool_call(home: ChoirHome) -> None:
    async with running_daemon(home), await ChoirClient.connect(home) as client:
        started = await client.agent_start("agent-1", {"dm": "console"})
        sent = await client.chat_send("agent-1", "remember my editor is helix")
        await replies_until(client, sent.after_seq, "outlives this session", within=30)
        [item] = (await client.knowledge_list("agent-1")).items
        shown = await client.knowledge_show("agent-1", item.name)

        opened: list[a.KnowledgeSource] = []

        async def stored() -> bool:  # the call's events come with the agent's next heartbeat
            opened.append(await client.knowledge_source("agent-1", item.name))
            return len(opened[-1].events) >= 2

        await poll_until(stored, within=30, every=0.2)
        source = opened[-1]
        history = await client.knowledge_history("agent-1", item.name)

    provenance = shown.provenance
    assert provenance is not None
    assert (provenance.agent, provenance.session_id, provenance.user, provenance.by) == (
        "agent-1",
        started.session_id,
        "console",
        None,
    )
    assert provenance.tool == "choir.memory.upsert"
    assert provenance.call_id
    assert provenance.rev is not None
    assert history.versions[0].provenance == provenance  # kept with the version too
    kinds = [event.kind for event in source.events]
    assert kinds[:2] == ["user_msg", "tool_call_requested"]
    assert source.events[0].text == "remember my editor is helix"
    assert source.events[0].rev < source.events[1].rev
    tool, arguments = source.events[1].text.split(" ", 1)
    assert tool == "choir.memory.upsert"
    assert "helix" in json.loads(arguments)["text"]
    assert source.note.startswith(f"agent agent-1, session {started.session_id}, with user console")
