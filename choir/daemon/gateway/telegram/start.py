"""Starting the Telegram gateway inside choird (startup step 8, §6.2)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

from choir.config import TelegramGateway
from choir.daemon.gateway.commands import DmCommands
from choir.daemon.operator.api import OperatorApi, call_verb
from choir.transport import Handler, Payload


async def start_telegram(operator: Handler | None, stack: AsyncExitStack) -> list[str]:
    """Start every configured bot over the operator API's context, closed by `stack`; the
    names of the bots started (none without an operator API: their commands need it)."""
    if not isinstance(operator, OperatorApi):
        return []
    ctx = operator.context
    if not any(isinstance(g, TelegramGateway) for g in ctx.config.gateways.values()):
        return []
    from choir.daemon.gateway.telegram.gateway import TelegramGateways

    async def call(verb: str, payload: Payload) -> Payload | AsyncIterator[Payload]:
        return await call_verb(ctx, verb, payload)  # in-process, as the console DM's commands

    gateways = TelegramGateways(ctx, DmCommands(call))
    stack.push_async_callback(gateways.close)
    await gateways.start()
    return sorted(gateways.bots)
