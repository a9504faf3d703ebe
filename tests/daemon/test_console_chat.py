"""The console DM: `chat.send` pushes to the bound agent; its durable replies stream back.

The agent side is a real HEARTBEAT carrying `agent_replied` events through choird's RPC entry
point; the operator side is the real operator socket and the real `choirctl chat` CLI.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.agents.services import AgentServices
from choir.errors import ConflictError, NotFoundError
from choir.home import ChoirHome
from choir.protocol import AgentReplied, CommittedEvent, Verb

from .agent import T0, AgentClient, Chain
from .operator_served import Pushes, served_api, served_choird, served_home, served_pushes

__all__ = ["served_api", "served_choird", "served_home", "served_pushes"]

CHOIRCTL = Path(sys.executable).parent / "choirctl"


def reply(chain: Chain, text: str, in_reply_to: str | None, category: str = "reply") -> None:
    rev = chain.rev + 1
    chain.events.append(
        CommittedEvent.seal(
            rev=rev,
            lane="edge",
            ts=T0 + timedelta(milliseconds=rev),
            hash_prev=chain.head,
            event=AgentReplied(text=text, in_reply_to=in_reply_to, category=category),
        )
    )


async def ship(agent: AgentClient, chain: Chain, base: int) -> None:
    await agent.ok(Verb.HEARTBEAT, chain.heartbeat(base))


async def test_a_message_reaches_the_agent_and_its_reply_streams_back(
    services: AgentServices, choird: ChoirClient, pushes: Pushes
) -> None:
    started = await services.sessions.start("agent-1", {})
    agent, chain = AgentClient(services, started), Chain()
    sent = await choird.chat_send("agent-1", "what is in notes.txt?")
    push = pushes.sent[-1]
    assert push[0] == started.session_id
    assert push[1] == {
        "kind": "user_message",
        "message_id": sent.message_id,
        "text": "what is in notes.txt?",
        "attachments": [],
    }
    replies = choird.chat_replies("agent-1", after_seq=sent.after_seq)
    reply(chain, "three lines", sent.message_id)
    await ship(agent, chain, 0)
    got = await asyncio.wait_for(anext(replies), 5)
    await replies.aclose()
    assert got.text == "three lines"
    assert got.in_reply_to == sent.message_id
    assert got.session_id == started.session_id


async def test_inject_is_pushed_as_an_injection(
    services: AgentServices, choird: ChoirClient, pushes: Pushes
) -> None:
    await services.sessions.start("agent-1", {})
    sent = await choird.chat_send("agent-1", "/inject use the staging database")
    assert sent.injected is True
    assert pushes.sent[-1][1] == {"kind": "inject", "text": "use the staging database"}
    empty = await choird.chat_send("agent-1", "/inject")  # a usage reply, nothing pushed
    assert empty.injected is False
    replies = choird.chat_replies("agent-1", after_seq=empty.after_seq)
    usage = await asyncio.wait_for(anext(replies), 5)
    await replies.aclose()
    assert (usage.category, usage.text) == ("command_error", "usage: /inject <message>")
    assert usage.in_reply_to == empty.message_id
    assert pushes.sent[-1][1]["text"] == "use the staging database"


async def test_refusals_name_the_problem(services: AgentServices, choird: ChoirClient) -> None:
    with pytest.raises(ConflictError, match="agent-1 is not running"):
        await choird.chat_send("agent-1", "hello")
    with pytest.raises(NotFoundError, match="no agent named 'agent-9'"):
        await choird.chat_send("agent-9", "hello")


@pytest.mark.slow
async def test_choirctl_chat_prints_the_answer_and_exits(
    services: AgentServices, home: ChoirHome, api: object, pushes: Pushes
) -> None:
    started = await services.sessions.start("agent-1", {})
    agent, chain = AgentClient(services, started), Chain()
    process = await asyncio.create_subprocess_exec(
        str(CHOIRCTL),
        "chat",
        "agent-1",
        "hello there",
        "--wait",
        "20",
        env={**os.environ, "CHOIR_HOME": str(home.root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    async with asyncio.timeout(20):
        for _ in itertools.count():
            if pushes.sent:
                break
            await asyncio.sleep(0.02)
    message_id = pushes.sent[-1][1]["message_id"]
    # replies made before choirctl opens its stream are kept by choird and caught up
    reply(chain, "core job refactor-auth finished: 3 files changed", None, "core_report")
    reply(chain, "Hello! How can I help?", message_id)
    await ship(agent, chain, 0)
    out, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "[core report] core job refactor-auth finished: 3 files changed",
        "Hello! How can I help?",
    ]


@pytest.mark.slow
async def test_choirctl_chat_does_not_print_an_earlier_messages_answer_as_this_ones(
    services: AgentServices, home: ChoirHome, choird: ChoirClient, pushes: Pushes
) -> None:
    """Issue 12 point 9: the error a restart left for the previous message arrives after the
    next one was sent; `choirctl chat` used to print it as if it answered the new message."""
    started = await services.sessions.start("agent-1", {})
    agent, chain = AgentClient(services, started), Chain()
    earlier = await choird.chat_send("agent-1", "an earlier message")
    process = await asyncio.create_subprocess_exec(
        str(CHOIRCTL),
        "chat",
        "agent-1",
        "hello again",
        "--wait",
        "20",
        env={**os.environ, "CHOIR_HOME": str(home.root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    async with asyncio.timeout(20):
        for _ in itertools.count():
            if len(pushes.sent) == 2:
                break
            await asyncio.sleep(0.02)
    message_id = pushes.sent[-1][1]["message_id"]
    restarted = "I was restarted while working on your message; please send it again."
    reply(chain, restarted, earlier.message_id, "error")
    reply(chain, "Hello again!", message_id)
    await ship(agent, chain, 0)
    out, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["Hello again!"]
