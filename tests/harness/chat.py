"""Chat with an agent through choird's operator API and wait for what answers it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from choir.client import ChoirClient
from choir.protocol.operator.answers import ChatSent

Reply = dict[str, Any]
"""A reply in its wire (JSON) form, as tests compare and print it."""


async def replies_through(
    client: ChoirClient,
    after_seq: int,
    last: Callable[[Reply], bool],
    *,
    agent_id: str = "agent-1",
    within: float = 30,
) -> list[Reply]:
    """The replies on `agent_id`'s DM after `after_seq`, up to and with the first for which
    `last(reply)` holds; AssertionError after `within` s (a deadline against hangs)."""
    got: list[Reply] = []
    replies = client.chat_replies(agent_id, after_seq=after_seq)
    try:
        async with asyncio.timeout(within):
            async for item in replies:
                reply = item.model_dump(mode="json")
                got.append(reply)
                if last(reply):
                    return got
    except TimeoutError:
        raise AssertionError(f"no awaited reply within {within} s: {got}") from None
    finally:
        await replies.aclose()
    raise AssertionError(f"the reply stream ended without the awaited reply: {got}")


def answers(sent: ChatSent) -> Callable[[Reply], bool]:
    """Whether a reply is the agent's answer (category `reply`) to the message `sent`
    (what chat.send answered)."""
    return lambda r: r["category"] == "reply" and r["in_reply_to"] == sent.message_id


async def answer_to(
    client: ChoirClient, sent: ChatSent, agent_id: str = "agent-1", *, within: float = 30
) -> Reply:
    """The reply to the message `sent` (what chat.send answered)."""
    got = await replies_through(
        client, sent.after_seq, answers(sent), agent_id=agent_id, within=within
    )
    return got[-1]


async def reply_to(
    client: ChoirClient, text: str, agent_id: str = "agent-1", *, within: float = 30
) -> Reply:
    """Send `text` to `agent_id`; its reply (category `reply`) to that message."""
    sent = await client.chat_send(agent_id, text)
    return await answer_to(client, sent, agent_id, within=within)


async def replies_until(
    operator: ChoirClient,
    after_seq: int,
    done: str,
    *also: str,
    within: float = 30,
    agent_id: str = "agent-1",
) -> list[Reply]:
    """Replies after `after_seq` up to the first one by which every text of `done` and `also`
    has appeared in some reply, in whatever order they came (the edge's answer and a core job's
    report race each other)."""
    wanted = {done, *also}

    def all_seen(reply: Reply) -> bool:
        nonlocal wanted
        wanted = {w for w in wanted if w not in reply["text"]}
        return not wanted

    return await replies_through(operator, after_seq, all_seen, agent_id=agent_id, within=within)
