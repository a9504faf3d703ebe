"""Starting the Telegram gateway inside choird (startup step 8, §6.2)."""

from __future__ import annotations

from contextlib import AsyncExitStack

from choir.config import TelegramGateway
from choir.daemon.gateway.commands import DmCommands, VerbCall
from choir.daemon.operator.context import OperatorContext


async def start_telegram(ctx: OperatorContext, call: VerbCall, stack: AsyncExitStack) -> list[str]:
    """Start every configured bot over the operator API's context (`call` runs its verbs
    in-process, as the console DM's commands do), closed by `stack`; the names started."""
    if not any(isinstance(g, TelegramGateway) for g in ctx.config.gateways.values()):
        return []  # python-telegram-bot is not even imported
    from choir.daemon.gateway.telegram.gateway import TelegramGateways

    gateways = TelegramGateways(ctx, DmCommands(call), call)
    stack.push_async_callback(gateways.close)
    await gateways.start()
    return sorted(gateways.bots)
