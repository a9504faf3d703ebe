"""`gateway.status` (and the gateways of `status`): the console DM and each Telegram bot.

choird reads `gateways` and `dms` once, at start (they are restart-required): what runs is the
config it started with. A gateway `config apply` added is listed `pending_restart` — it does
not run until choird restarts, whatever the applied config says — and one it removed or
changed is listed as it runs, with `pending` saying what the restart will do. A Telegram bot's
own state, last poll and update, queued and failed sends come from the bot itself
(`BotStatus`); before startup step 8 has started the bots, a configured one is `starting`.

Which agent holds each DM is read from the active sessions; while Postgres does not answer
(within `BINDINGS_TIMEOUT_S`) the rest is still reported, with `bindings_known` false.
"""

from __future__ import annotations

import asyncio
from typing import Final

from choir.config import ChoirConfig, TelegramGateway
from choir.daemon.gateway.telegram.status import RUNNING, BotStatus
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import iso
from choir.protocol.operator.answers import (
    GatewayDetail,
    GatewayDmView,
    GatewayStatus,
    GatewayView,
)
from choir.protocol.operator.requests import NoArguments
from choir.store.sessions import SessionRow

PENDING_RESTART: Final = "pending_restart"
"""A gateway `config apply` added: it starts when choird restarts."""
STARTING: Final = "starting"
"""A configured bot before startup step 8 started it."""
BINDINGS_TIMEOUT_S: Final = 1.0
"""`gateway.status` answers within about this long even when Postgres hangs."""

Bound = dict[str, SessionRow]
"""The active session holding each DM, by DM name."""


async def gateway_status(ctx: OperatorContext, _: NoArguments) -> GatewayStatus:
    """Every gateway choird runs (or will at its next start), with its DMs and their agents."""
    bound = await _bound(ctx)
    return GatewayStatus(
        gateways=[_detail(ctx, name, bound or {}) for name in _names(ctx)],
        bindings_known=bound is not None,
    )


def gateway_views(ctx: OperatorContext) -> list[GatewayView]:
    """The gateways of `status`: name, type and state (as `gateway.status` has them)."""
    return [
        GatewayView(
            name=name,
            type=_config_of(ctx, name).gateways[name].type,
            state=gateway_state(ctx, name),
        )
        for name in _names(ctx)
    ]


def gateway_state(ctx: OperatorContext, name: str) -> str:
    """`running` for the console DM, a bot's own state, `starting` or `pending_restart`."""
    started = ctx.stage.started.gateways.get(name)
    if started is None:
        return PENDING_RESTART
    if started.type == "console":
        return RUNNING  # choird serves the console DM itself (`choirctl chat`, the TUI)
    bot = ctx.telegram_bots.get(name)
    return bot().state if bot is not None else STARTING


def _names(ctx: OperatorContext) -> list[str]:
    return sorted(set(ctx.stage.started.gateways) | set(ctx.config.gateways))


def _config_of(ctx: OperatorContext, name: str) -> ChoirConfig:
    """The config the gateway runs from: the started one, else the applied one (not yet run)."""
    started = ctx.stage.started
    return started if name in started.gateways else ctx.config


def _pending(ctx: OperatorContext, name: str) -> str | None:
    """What choird's next start changes about the gateway (None: nothing)."""
    started, applied = ctx.stage.started, ctx.config
    if name not in started.gateways:
        return "added"
    if name not in applied.gateways:
        return "removed"
    changed = started.gateways[name] != applied.gateways[name] or _dms(started, name) != _dms(
        applied, name
    )
    return "changed" if changed else None


def _dms(config: ChoirConfig, gateway: str) -> dict[str, object]:
    return {name: dm for name, dm in config.dms.items() if dm.gateway == gateway}


def _detail(ctx: OperatorContext, name: str, bound: Bound) -> GatewayDetail:
    config = _config_of(ctx, name)
    gateway = config.gateways[name]
    kind = gateway.type
    bot = ctx.telegram_bots.get(name) if name in ctx.stage.started.gateways else None
    status = bot() if bot is not None else None
    return GatewayDetail(
        name=name,
        type=kind,
        state=gateway_state(ctx, name),
        pending=_pending(ctx, name),
        secret=gateway.secret if isinstance(gateway, TelegramGateway) else None,
        dms=_dm_views(config, name, bound),
        **_bot_fields(status, console=kind == "console"),
    )


def _bot_fields(status: BotStatus | None, *, console: bool) -> dict[str, object]:
    """What a bot says of itself; the console DM has no bot, no polling and no send queue."""
    if status is None:
        counts = None if console else 0
        return dict.fromkeys(
            ("since", "bot", "last_poll_at", "last_update_at", "last_error", "last_error_at")
        ) | {"queued": counts, "failed": counts}
    return {
        "since": iso(status.since),
        "bot": f"@{status.username}" if status.username else None,
        "last_poll_at": iso(status.last_poll_at),
        "last_update_at": iso(status.last_update_at),
        "queued": status.queued,
        "failed": status.failed,
        "last_error": status.last_error,
        "last_error_at": iso(status.last_error_at),
    }


def _dm_views(config: ChoirConfig, gateway: str, bound: Bound) -> list[GatewayDmView]:
    defaults = {agent.defaults.dm: agent_id for agent_id, agent in sorted(config.agents.items())}
    views = []
    for name, dm in sorted(config.dms.items()):
        if dm.gateway != gateway:
            continue
        session = bound.get(name)
        views.append(
            GatewayDmView(
                name=name,
                user_id=dm.user_id,
                admin=dm.admin,
                agent_id=session.agent_id if session else None,
                session_id=session.session_id if session else None,
                default_agent=defaults.get(name),
            )
        )
    return views


async def _bound(ctx: OperatorContext) -> Bound | None:
    """The active session holding each DM; None when Postgres does not answer in time."""
    try:
        async with asyncio.timeout(BINDINGS_TIMEOUT_S):
            rows = await ctx.sessions.active()
    except Exception:  # any driver or socket failure: the bindings are unknown, nothing else
        return None
    return {str(dm): row for row in rows if (dm := row.resource_bindings.get("dm"))}
