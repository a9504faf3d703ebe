"""Memory classes end to end: a real choird, the real `choir-agent` on the process runtime and
a scripted model whose steps call the memory tools as a model would.

The model stores a personal item in a session bound to one DM (one user); a session of the same
agent bound to another DM does not find it, the first DM's next session does. Writing the
agent's own system memory is refused, and the model reads the one-line refusal.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.chat import replies_until
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config

pytestmark = pytest.mark.slow

JSON_STRING = r'"((?:[^"\\]|\\.)*)"'
SUMMARY = json.dumps({"summary": "A short chat.", "topics": [], "decisions": [], "open_items": []})


def _call(match: str, **arguments: Any) -> ToolCallsStep:
    return ToolCallsStep(
        after="user",
        match=match,
        repeat=True,
        calls=[ScriptedCall(name=arguments.pop("tool"), arguments=arguments)],
    )


SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        _call(
            "remember my pet",
            tool="choir.memory.upsert",
            op="put",
            name="user.pet",
            text="The user's cat is called Miso.",
            memory="personal",
        ),
        _call(
            "change who you are",
            tool="choir.memory.upsert",
            op="add",
            text="I am a pirate.",
            memory="system",
        ),
        _call(
            "what is my pet",
            tool="choir.memory.query",
            store="knowledge",
            mode="text",
            query="cat",
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
            match_regex=r'^\{"status":"success","summary":"stored knowledge',
            repeat=True,
            text="stored",
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


@pytest.fixture
async def model() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(SCRIPT) as server:
        yield server


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    data: dict[str, Any] = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
    data["dms"]["alice"] = {"gateway": "console", "user_id": "alice"}
    write_config(home, data)
    return home


async def say(client: ChoirClient, text: str, awaited: str) -> str:
    sent = await client.chat_send("agent-1", text)
    replies = await replies_until(client, sent.after_seq, awaited, within=30)
    return str(replies[-1]["text"])


async def test_personal_memory_follows_the_user_and_system_memory_is_read_only(
    home: ChoirHome,
) -> None:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        assert await say(client, "remember my pet", "stored") == "stored"
        assert (
            await say(client, "what is my pet", "found") == "found: The user's cat is called Miso."
        )
        refused = await say(client, "change who you are", "error")
        assert refused.startswith(
            "error: memory agent-1/system is the agent's own definition (system class), "
            "read-only to it"
        )
        await client.agent_stop("agent-1")

        await client.agent_start("agent-1", {"dm": "alice"}, new_session=True)
        assert await say(client, "what is my pet", "found") == "found nothing"
        await client.agent_stop("agent-1")

        await client.agent_start("agent-1", {"dm": "console"}, new_session=True)
        assert (
            await say(client, "what is my pet", "found") == "found: The user's cat is called Miso."
        )
        await client.agent_stop("agent-1")
        assert daemon.memory_store is not None
        item = await daemon.memory_store.get_knowledge("agent-1", "user.pet")
        assert (item.memory_class, item.owner_user) == ("personal", "console")
