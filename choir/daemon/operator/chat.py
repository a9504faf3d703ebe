"""`chat.send` and `chat.replies`: the console DM over the operator API (`choirctl chat`, TUI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from choir.commands.model import DmScope
from choir.config import ChoirConfig, ConsoleGateway
from choir.daemon.operator.context import OperatorContext
from choir.errors import ConflictError, UsageError
from choir.protocol.operator.answers import ChatReply, ChatSent
from choir.protocol.operator.requests import ChatReplies, ChatSend
from choir.store.sessions import SessionRow


async def chat_send(ctx: OperatorContext, request: ChatSend) -> ChatSent:
    """Deliver the text to the agent bound to a console DM: a message, or a command run with
    the DM's scope (its `admin` flag in config.json; `choirctl init`'s console DM is admin)."""
    if not request.text.strip():
        raise UsageError("empty message: type something to send")
    session = await ctx.running_session(request.agent_id, hint=None)  # says how to start it
    dm = _require_console_dm(ctx.config, request.agent_id, session)
    scope: DmScope = "admin" if ctx.config.dms[dm].admin else "regular"
    sent = await ctx.console.send(
        session, request.text, push=ctx.push, inbox=ctx.services.inbox, dm=dm, scope=scope
    )
    return ChatSent.model_validate(sent)


async def chat_replies(ctx: OperatorContext, request: ChatReplies) -> AsyncIterator[ChatReply]:
    ctx.require_agent(request.agent_id)
    return _typed(ctx.console.replies(request.agent_id, after_seq=request.after_seq))


async def _typed(replies: AsyncIterator[dict[str, Any]]) -> AsyncIterator[ChatReply]:
    """The console's replies as models; closes `replies` (its reader detaches)."""
    try:
        async for reply in replies:
            yield ChatReply.model_validate(reply)
    finally:
        close = getattr(replies, "aclose", None)
        if close is not None:
            await close()


def _require_console_dm(config: ChoirConfig, agent_id: str, session: SessionRow) -> str:
    """The console DM the session is bound to (ConflictError if it is bound elsewhere)."""
    dm = str(session.resource_bindings.get("dm") or "")
    dms = config.dms
    if dm not in dms or not isinstance(config.gateways.get(dms[dm].gateway), ConsoleGateway):
        raise ConflictError(
            f"{agent_id} is bound to DM {dm!r}, not a console DM: talk to it there, or "
            f"start it with --dm <a console DM>"
        )
    return dm
