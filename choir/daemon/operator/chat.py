"""`chat.send` and `chat.replies`: the console DM over the operator API (`choirctl chat`, TUI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field

from choir.daemon.operator.context import OperatorContext
from choir.protocol import WireModel


class ChatSend(WireModel):
    agent_id: str
    """The agent to talk to; it must be running and bound to a console DM."""
    text: str = Field(min_length=1, max_length=32_000)
    """A message, or `/inject <instruction>` for edge's next safe point (§12.8)."""


class ChatReplies(WireModel):
    agent_id: str
    """Whose replies to follow."""
    after_seq: int = Field(default=0, ge=0)
    """Skip kept replies up to this sequence number."""


async def chat_send(ctx: OperatorContext, request: ChatSend) -> dict[str, Any]:
    return await ctx.console.send(ctx, request.agent_id, request.text)


async def chat_replies(ctx: OperatorContext, request: ChatReplies) -> AsyncIterator[dict[str, Any]]:
    ctx.require_agent(request.agent_id)
    return ctx.console.replies(request.agent_id, after_seq=request.after_seq)
