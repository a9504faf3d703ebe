"""Memory across sessions end to end, with each embedding provider (issue 14's "done when").

A real choird in the test process, the test session's Postgres, the real `choir-agent` on the
process runtime, and a scripted model whose steps call the memory tools as a model would. In
session 1 the agent is told a fact and upserts a knowledge item; its graceful stop writes a
summary and choird closes the session into mid-term memory. Session 2 finds both the knowledge
item and the session-1 chunks. With `mid_term_sessions` 1, session 2's close promotes session 1,
and session 3 drills into it with `session_detail`. The embedder is the local model (the
default) or an OpenAI-compatible endpoint — a local server that speaks the protocol and counts
what it was sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.core.memory.chunks import Tier
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.store import MemoryStore
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_until
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.waits import poll_until
from tests.memory.embeddings_server import EmbeddingsServer

pytestmark = pytest.mark.slow

JSON_STRING = r'"((?:[^"\\]|\\.)*)"'
SUMMARY = json.dumps(
    {
        "summary": "The user set the launch code to zebra-42 and named a favourite colour.",
        "topics": ["launch code"],
        "decisions": ["the launch code is zebra-42"],
        "open_items": [],
    }
)
SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        # user steps answer user messages only: a tool result quoting them must not match
        ReplyStep(
            after="user",
            match="the launch code is",
            repeat=True,
            text="Noted: launch code zebra-42.",
        ),
        ToolCallsStep(
            after="user",
            match="remember my colour",
            repeat=True,
            calls=[
                ScriptedCall(
                    name="choir.memory.upsert",
                    arguments={
                        "op": "put",
                        "name": "user.colour",
                        "text": "The user's favourite colour is teal.",
                    },
                )
            ],
        ),
        ReplyStep(
            after="tool",
            match_regex=r'^\{"status":"success","summary":"stored knowledge',
            repeat=True,
            text="stored",
        ),
        ToolCallsStep(
            after="user",
            match_regex=r"search (session|knowledge) (\w+) for (.+)",
            templated=True,
            repeat=True,
            calls=[
                ScriptedCall(
                    name="choir.memory.query",
                    arguments={"store": "{1}", "mode": "{2}", "query": "{3}"},
                )
            ],
        ),
        ToolCallsStep(
            after="user",
            match_regex=r"open session (\S+)",
            templated=True,
            repeat=True,
            calls=[
                ScriptedCall(
                    name="choir.memory.query",
                    arguments={
                        "store": "session",
                        "mode": "session_detail",
                        "session_id": "{1}",
                        "query": "zebra",
                    },
                )
            ],
        ),
        ReplyStep(
            after="tool",
            match_regex='^\\{"status":"error","summary":' + JSON_STRING,
            templated=True,
            repeat=True,
            text="error: {1}",
        ),
        ReplyStep(
            after="tool",
            match_regex=r'"hits":\[\{"text":' + JSON_STRING,
            templated=True,
            repeat=True,
            text="found: {1}",
        ),
        ReplyStep(after="tool", match='"hits":[]', repeat=True, text="found nothing"),
    ]
)


@pytest.fixture(params=["local", "openai-compatible"])
async def embedder(request: pytest.FixtureRequest) -> AsyncIterator[EmbeddingsServer | None]:
    if request.param == "local":
        yield None
        return
    async with EmbeddingsServer(dimensions=16) as server:
        yield server


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(SCRIPT) as server:
        yield server


@pytest.fixture
def home(
    root: Path,
    pg_params: ConnectParams,
    model: ScriptedModelServer,
    embedder: EmbeddingsServer | None,
) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params), mid_term_sessions=1)
    data: dict[str, Any] = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
    if embedder is not None:
        data["embedding"] = {"provider": "test-server", "endpoint": embedder.url, "dimensions": 16}
    write_config(home, data)
    return home


async def say(client: ChoirClient, text: str, awaited: str) -> str:
    sent = await client.chat_send("agent-1", text)
    replies = await replies_until(client, sent.after_seq, awaited, within=30)
    return str(replies[-1]["text"])


async def session(client: ChoirClient, *, new: bool) -> str:
    started = await client.agent_start("agent-1", {"dm": "console"}, new_session=new)
    return started.session_id


async def closed(daemon: ChoirDaemon, sessions: int, tier: Tier = Tier.MID_TERM) -> MemoryStore:
    """The store, once `sessions` sessions have chunks in `tier` and every vector is stored."""

    async def done() -> bool:
        if daemon.memory_store is None:
            return False
        stats = await daemon.memory_store.stats("agent-1")
        return stats.sessions[tier] >= sessions and stats.vectors_missing == 0

    await poll_until(done, within=60, every=0.2)
    assert daemon.memory_store is not None
    return daemon.memory_store


async def test_a_later_session_finds_the_knowledge_and_the_chunks_of_an_earlier_one(
    home: ChoirHome, embedder: EmbeddingsServer | None
) -> None:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        first = await session(client, new=False)
        await say(client, "the launch code is zebra-42", "Noted")
        await say(client, "remember my colour", "stored")
        await client.agent_stop("agent-1")
        await closed(daemon, sessions=1)

        await session(client, new=True)
        found = await say(client, "search session text for zebra", "found")
        assert "zebra-42" in found
        knowledge = await say(client, "search knowledge text for colour", "found")
        assert knowledge == "found: The user's favourite colour is teal."
        if embedder is None:  # the local model's vectors mean something: semantic finds it
            meant = await say(client, "search knowledge semantic for favourite colour", "found")
            assert meant == knowledge
            hybrid = await say(client, "search session hybrid for launch code", "found")
            assert "zebra-42" in hybrid
        await client.agent_stop("agent-1")
        # past mid_term_sessions (1): session 1 is promoted to its summary
        store = await closed(daemon, sessions=1, tier=Tier.LONG_TERM_SUMMARY)
        assert (await store.mid_term_sessions("agent-1")) != [first]

        await session(client, new=True)
        summary = await say(client, "search session text for zebra", "found")
        assert "zebra-42" in summary
        detail = await say(client, f"open session {first}", "found")
        assert "zebra-42" in detail
        await client.agent_stop("agent-1")

    if embedder is not None:  # what the endpoint embedded: the chunks, the item, the queries
        sent = [text for batch in embedder.batches for text in batch]
        assert "The user's favourite colour is teal." in sent
        assert any("zebra-42" in text for text in sent)
