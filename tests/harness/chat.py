"""Chat with an agent through choird's operator API and wait for what answers it."""

from __future__ import annotations

import asyncio
from typing import Any

from choir.client import ChoirClient


async def reply_to(
    client: ChoirClient, text: str, agent_id: str = "agent-1", *, within: float = 30
) -> dict[str, Any]:
    """Send `text` to `agent_id`; its reply (category `reply`) to that message."""
    sent = await client.chat_send(agent_id, text)
    replies = client.chat_replies(agent_id, after_seq=sent.after_seq)
    try:
        async with asyncio.timeout(within):
            async for reply in replies:
                if reply.category == "reply" and reply.in_reply_to == sent.message_id:
                    return reply.model_dump(mode="json")
    finally:
        await replies.aclose()
    raise AssertionError(f"the reply stream ended without a reply to {text!r}")


async def replies_until(
    operator: ChoirClient,
    after_seq: int,
    done: str,
    *also: str,
    within: float = 30,
    agent_id: str = "agent-1",
) -> list[dict[str, Any]]:
    """Replies after `after_seq` up to the first one by which every text of `done` and `also`
    has appeared in some reply, in whatever order they came (the edge's answer and a core job's
    report race each other)."""
    wanted = {done, *also}
    got: list[dict[str, Any]] = []
    replies = operator.chat_replies(agent_id, after_seq=after_seq)
    try:
        async with asyncio.timeout(within):
            async for reply in replies:
                got.append(reply.model_dump(mode="json"))
                wanted = {w for w in wanted if w not in reply.text}
                if not wanted:
                    return got
    finally:
        await replies.aclose()
    raise AssertionError(f"no reply with {sorted(wanted)!r}: {got}")
