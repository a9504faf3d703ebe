"""`choirctl gateway status`: the console DM and each Telegram bot, with their DMs (§19)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit

if TYPE_CHECKING:
    from choir.protocol.operator.answers import GatewayDetail, GatewayDmView, GatewayStatus

app = typer.Typer(
    rich_markup_mode=None,
    help="Show the console DM and Telegram bots (needs choird).",
    no_args_is_help=True,
)

TROUBLE = {
    "invalid_token": "TOKEN REJECTED (invalid or revoked): set the right one with choirctl "
    "secret set {secret}, then restart choird (choir restart)",
    "no_token": "NO TOKEN: its secret is not set",
    "backing_off": "BACKING OFF: the Bot API does not answer; retrying",
    "pending_restart": "added by config apply: starts when choird restarts (choir restart)",
    "starting": "choird is starting it",
}
"""What a state means for the operator, shown next to it."""
PENDING = {
    "changed": "changed by config apply: runs as it started until choird restarts (choir restart)",
    "removed": "removed by config apply: runs until choird restarts (choir restart)",
}


@app.command("status")
@documented("gateway status")
def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.gateway_status())
    emit(data, as_json, lambda: print("\n".join(status_lines(data))))


def status_lines(data: GatewayStatus) -> list[str]:
    """Each gateway: a head line, then its polling, sends, last error and DMs."""
    if not data.gateways:
        return ["no gateways configured (config.json `gateways`)"]
    lines: list[str] = []
    for gateway in data.gateways:
        lines += _gateway_lines(gateway, data.bindings_known)
    if not data.bindings_known:
        lines.append("(Postgres does not answer: which agent holds each DM is unknown)")
    return lines


def _gateway_lines(gateway: GatewayDetail, known: bool) -> list[str]:
    from choir.ctl.render.humanize import moment

    kind = f"{gateway.type} {gateway.bot}" if gateway.bot else gateway.type
    state = gateway.state
    if gateway.since:
        state += f" since {moment(gateway.since)}"
    meaning = TROUBLE.get(gateway.state)
    if meaning:
        state += f" — {meaning.replace('{secret}', gateway.secret or '<its secret>')}"
    lines = [f"{gateway.name} ({kind}): {state}"]
    if gateway.pending in PENDING:
        lines.append(f"  {'config':<12}{PENDING[gateway.pending]}")
    if gateway.type != "console":
        lines += [
            f"  {'last update':<12}{_when(gateway.last_update_at)}"
            f" (last poll {_when(gateway.last_poll_at)})",
            f"  {'sends':<12}{gateway.queued} queued, {gateway.failed} failed",
            f"  {'last error':<12}{_error(gateway)}",
        ]
    lines += [_dm_line(dm, known) for dm in gateway.dms] or [f"  {'dm':<12}none configured"]
    return lines


def _error(gateway: GatewayDetail) -> str:
    from choir.ctl.render.humanize import moment

    if gateway.last_error is None:
        return "-"
    return f"{moment(gateway.last_error_at)} {gateway.last_error}"


def _dm_line(dm: GatewayDmView, known: bool) -> str:
    who = f"user {dm.user_id}" + (", admin" if dm.admin else "")
    if dm.agent_id:
        agent = f"{dm.agent_id} (session {dm.session_id})"
    elif not known:
        agent = "?"
    else:
        default = f"; default agent {dm.default_agent}" if dm.default_agent else ""
        agent = f"no agent running{default}"
    return f"  {'dm ' + dm.name:<12}{who} → {agent}"


def _when(iso: str | None) -> str:
    from choir.ctl.render.humanize import ago, moment

    return "never" if iso is None else f"{moment(iso)}, {ago(iso)}"
