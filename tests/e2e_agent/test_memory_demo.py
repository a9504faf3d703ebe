"""What a new user sees of memory with the demo model: told to remember, it still knows after a
restart (a new session: nothing of the first is in its context).

A real choird in the test process on a home `choirctl init` made (its demo model served by
choir-agent itself), the test session's Postgres, the real `choir-agent` on the process runtime,
and the local embedder — the embedded defaults a fresh machine has.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.core.memory.summaries.tree import TREE_KEYS
from choir.home import ChoirHome
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_until
from tests.harness.daemons import pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home

pytestmark = pytest.mark.slow


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params))


async def say(client: ChoirClient, text: str, awaited: str) -> str:
    sent = await client.chat_send("agent-1", text)
    replies = await replies_until(client, sent.after_seq, awaited, within=30)
    return replies[-1]["text"]


async def test_what_it_is_told_to_remember_outlives_a_restart(home: ChoirHome) -> None:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        first = await client.agent_start("agent-1", {"dm": "console"})
        nothing = await say(client, "recall my editor", "found nothing")
        assert "remember <something>" in nothing
        told = await say(client, "remember my editor is helix", "outlives this session")
        assert "recall" in told
        await client.agent_stop("agent-1")

        second = await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        assert second.session_id != first.session_id
        recalled = await say(client, "recall editor", "From my memory")
        assert recalled == "From my memory: my editor is helix"
        assert daemon.memory_store is not None
        async with pool_of(daemon).acquire() as conn, run_as_agent(conn, "agent-1") as agent:
            noted = await agent.fetchval(  # the summary tree's items (the close's) aside
                "SELECT count(*) FROM knowledge_documents WHERE NOT metadata ?| $1::text[]",
                list(TREE_KEYS),
            )
            kinds = await agent.fetch("SELECT metadata FROM knowledge_documents")
        assert noted == 1, [row["metadata"] for row in kinds]
