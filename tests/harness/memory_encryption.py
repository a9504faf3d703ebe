"""An agent with an encrypted memory, for tests on a real choird: agent-1's personal memory
marked encrypted, and a scripted model that calls the memory tools there as a model would
("remember my pet", "note the breed", "what is my pet", "neighbours of my pet",
"expand my pet"). Shared by the end-to-end test
(`tests/e2e_agent/test_memory_encryption.py`) and the console's (`tests/tui/actions/`)."""

from __future__ import annotations

import json
from typing import Any

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from tests.harness.chat import replies_until
from tests.harness.homes import read_config, write_config

JSON_STRING = r'"((?:[^"\\]|\\.)*)"'
SUMMARY = json.dumps({"summary": "A short chat.", "topics": [], "decisions": [], "open_items": []})
SECRET = "The user's cat is called Miso."


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
            text=SECRET,
            data={"species": "cat"},
            tags=["pet"],
            memory="personal",
        ),
        _call(
            "note the breed",
            tool="choir.memory.upsert",
            op="write",
            name="user.pet",
            data={"species": "cat", "breed": "tabby"},
        ),
        _call(
            "what is my pet",
            tool="choir.memory.query",
            store="knowledge",
            mode="text",
            query="encrypted",
            tags=["pet"],
        ),
        _call(
            "neighbours of my pet",
            tool="choir.memory.query",
            store="knowledge",
            mode="neighbours",
            query="user.pet",
        ),
        _call(
            "expand my pet",
            tool="choir.memory.query",
            store="knowledge",
            mode="expand",
            query="user.pet",
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
            match_regex=r'^\{"status":"success","summary":"(stored|wrote) knowledge',
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
        ReplyStep(  # neighbours and expand show the item itself first: its text
            after="tool",
            match_regex=r'"mode":"(neighbours|expand)".*?"text":' + JSON_STRING,
            templated=True,
            repeat=True,
            text="{1}: {2}",
        ),
    ]
)


def encrypt_personal(home: ChoirHome, agent: str = "agent-1") -> ChoirHome:
    """`home` with `agent`'s personal memory marked encrypted."""
    data: dict[str, Any] = read_config(home)
    data["agents"][agent]["memories"] = [
        {"class": "personal", "role": "read-write", "encrypted": True}
    ]
    write_config(home, data)
    return home


async def say(client: ChoirClient, text: str, awaited: str, agent: str = "agent-1") -> str:
    """Send `text` to `agent` over the console DM; its reply once one holds `awaited`."""
    sent = await client.chat_send(agent, text)
    replies = await replies_until(client, sent.after_seq, awaited, within=30)
    return str(replies[-1]["text"])
