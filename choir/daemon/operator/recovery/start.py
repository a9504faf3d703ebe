"""What choird does for the recovery inbox when it starts (issue 19).

Before its timers run (the approval sweep among them), choird notes what only the moment of a
restart can tell: approvals whose deadline passed while no choird ran (the sweep is about to
time them out — §19.6's silence, but nobody was there), and updates a previous choird never
finished. Then, once adopted agents had a moment to report their held jobs, one message goes to
every admin DM — the console's and each Telegram bot's — listing what waits, if anything does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from choir.core.recovery_inbox import notice_text
from choir.daemon.operator.context import OperatorContext
from choir.logs import get_logger
from choir.store.approvals.pending import list_approvals
from choir.store.recovery_items import interrupted_applies, note_timed_out

log = get_logger("choird.recovery_inbox")

NOTICE_DELAY_S: Final = 6.0
"""How long after the start the admin DMs are told: adopted agents report their held jobs and
the first approval sweep (every 5 s) has run by then."""
NOTICE_ITEMS: Final = 10
"""Items named in the message; the rest are counted."""
INTERRUPTED: Final = "choird stopped before the update finished: check the agent's state"

Notify = Callable[[str], None]


async def note_restart(ctx: OperatorContext) -> None:
    """Record what timed out or broke because choird was down (before its timers start); a
    failure is logged, never fatal: choird starts, and the inbox still lists what it can."""
    try:
        await _note_restart(ctx)
    except Exception:
        log.exception("restart: the recovery inbox could not note what choird's absence left")


async def _note_restart(ctx: OperatorContext) -> None:
    timeout = timedelta(milliseconds=ctx.config.approval_timeout_ms)
    deadline = ctx.clock() - timeout
    async with ctx.pool.acquire() as conn:
        interrupted = await interrupted_applies(conn, INTERRUPTED)
        overdue = [a for a in await list_approvals(conn) if a.created_at < deadline]
        for approval in overdue:
            reason = (
                f"asked at {approval.created_at.isoformat(timespec='seconds')}; its timeout "
                "passed while choird was down, so it counts as rejected"
            )
            await note_timed_out(
                conn,
                approval.id,
                agent_id=approval.agent_id,
                session_id=approval.session_id,
                reason=reason,
                now=approval.created_at + timeout,  # when it timed out, unseen
            )
    if interrupted or overdue:
        log.warning(
            "restart: decisions wait in the recovery inbox",
            fields={"interrupted_updates": interrupted, "timed_out_approvals": len(overdue)},
        )


async def tell_admins(
    ctx: OperatorContext, notifiers: list[Notify], delay_s: float = NOTICE_DELAY_S
) -> None:
    """After `delay_s`, one message to every admin DM if anything waited when choird started."""
    await asyncio.sleep(delay_s)
    from choir.daemon.operator.recovery.inbox import collect  # the inbox verbs' module: late

    try:
        items = await collect(ctx)
    except Exception:  # Postgres away: status and the feed say so; the inbox is read later
        log.exception("restart notice: the recovery inbox could not be read")
        return
    # what waited when choird started; what came up since is news, not the restart's
    items = [i for i in items if datetime.fromisoformat(i.since) < ctx.started_at]
    if not items:
        return
    titles = [item.title for item in items[:NOTICE_ITEMS]]
    text = notice_text(titles, len(items) - len(titles))
    for notify in notifiers:
        notify(text)
    log.info("restart notice sent to the admin DMs", fields={"items": len(items)})
