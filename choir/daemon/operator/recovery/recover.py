"""`session.recover` (DESIGN-NOTES "Durability"): the calls a crash left with unknown outcomes.

After a crash, a non-idempotent call with a committed intent and no result may or may not have
happened; the agent holds the core job that made it and never re-runs it on its own. Without a
choice this verb lists those calls, read from the durable log (so it works whether or not the
agent is running again); with one it sends the decision to the agent (`RecoverPush`), which
commits an `outcome_unknown` result for each call and resumes, resumes read-only, or aborts the
job — the log then records the decision, and the call leaves the list.
"""

from __future__ import annotations

from collections.abc import Iterable

from choir.daemon.operator.context import OperatorContext
from choir.errors import ConflictError
from choir.protocol.log.lanes import job_name_of
from choir.protocol.operator.answers import InterruptedCall, SessionRecovery
from choir.protocol.operator.requests import SessionRecover
from choir.protocol.wire.pushes import RecoverPush
from choir.store.events import EventRecord, read_events

PAGE = 1000
"""Events read per query."""


def interrupted_calls(events: Iterable[EventRecord]) -> list[InterruptedCall]:
    """Non-idempotent intents without a result, oldest first, as the operator sees them."""
    open_intents: dict[str, EventRecord] = {}
    for event in events:
        call_id = str(event.payload.get("call_id"))
        if event.event_type == "tool_call_committed" and not event.payload.get("idempotent"):
            open_intents[call_id] = event
        elif event.event_type == "tool_result_committed":
            open_intents.pop(call_id, None)
    return [
        InterruptedCall(
            rev=event.rev,
            lane=event.lane,
            job_name=job_name_of(event.lane),
            call_id=event.payload["call_id"],
            tool=event.payload["tool"],
            side_effect=event.payload.get("side_effect"),
        )
        for event in open_intents.values()
    ]


async def session_recover(ctx: OperatorContext, request: SessionRecover) -> SessionRecovery:
    """List the session's interrupted calls, or send the operator's decision on them."""
    row = await ctx.sessions.get(request.session_id)
    calls = interrupted_calls(await session_log(ctx, row.session_id))
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


async def session_log(ctx: OperatorContext, session_id: str) -> list[EventRecord]:
    """Every event of the session, read a page at a time."""
    events: list[EventRecord] = []
    async with ctx.pool.acquire() as conn:
        while True:
            start = events[-1].rev + 1 if events else 1
            page = await read_events(conn, session_id, start, PAGE)
            events.extend(page)
            if len(page) < PAGE:
                return events
