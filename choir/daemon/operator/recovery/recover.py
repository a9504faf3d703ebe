"""`session.recover` (DESIGN-NOTES "Durability"): the calls a crash left with unknown outcomes.

After a crash, a non-idempotent call with a committed intent and no result may or may not have
happened; the agent holds the core job that made it and never re-runs it on its own. Without a
choice this verb lists those calls, read from the durable log (so it works whether or not the
agent is running again); with one it sends the decision to the agent (`RecoverPush`), which
commits an `outcome_unknown` result for each call and resumes, resumes read-only, or aborts the
job — the log then records the decision, and the call leaves the list.

The calls are read by `choir.store.open_intents` — the intents after the session's latest
snapshot and those open at it, each result looked up by call id — not by folding the log: a
long session's is tens of thousands of events, and `inbox resolve` reads them per decision.
"""

from __future__ import annotations

from choir.daemon.operator.context import OperatorContext
from choir.errors import ConflictError
from choir.protocol.log.lanes import job_name_of
from choir.protocol.operator.answers import InterruptedCall, SessionRecovery
from choir.protocol.operator.requests import SessionRecover
from choir.protocol.wire.pushes import RecoverPush
from choir.store.open_intents import unanswered_intents
from choir.store.postgres.pool import Connection


async def interrupted_calls(conn: Connection, session_id: str) -> list[InterruptedCall]:
    """Non-idempotent intents without a result, oldest first, as the operator sees them."""
    return [
        InterruptedCall(
            rev=intent.rev,
            lane=intent.lane,
            job_name=job_name_of(intent.lane),
            call_id=intent.call_id,
            tool=intent.tool,
            side_effect=intent.side_effect,
        )
        for intent in await unanswered_intents(conn, session_id)
    ]


async def session_recover(ctx: OperatorContext, request: SessionRecover) -> SessionRecovery:
    """List the session's interrupted calls, or send the operator's decision on them."""
    row = await ctx.sessions.get(request.session_id)
    async with ctx.pool.acquire() as conn:
        calls = await interrupted_calls(conn, row.session_id)
    if request.choice is None:
        return SessionRecovery(
            session_id=row.session_id, status=row.status.value, interrupted=calls
        )
    row = await ctx.active_session(request.session_id)
    held = [c for c in calls if request.job_name is None or c.job_name == request.job_name]
    if not held:
        which = f"core job {request.job_name}" if request.job_name else "session"
        raise ConflictError(
            f"{which} of {row.session_id} has no call with an unknown outcome: nothing to "
            f"recover (see choirctl session recover {row.session_id})"
        )
    ctx.push(row.session_id, RecoverPush(choice=request.choice, job_name=request.job_name))
    return SessionRecovery(
        session_id=row.session_id,
        choice=request.choice,
        job_name=request.job_name,
        requested=True,
        interrupted=held,
    )
