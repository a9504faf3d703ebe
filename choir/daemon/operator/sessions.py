"""`session.list`, `session.cores`, `session.locks`, `session.cancel`, `session.compact`,
`session.inject` (§17.1 Session, §19.3).

Cancel, inject and compact are requests to the agent, not changes choird makes: they ride the
session's push channel and the agent acts at its next safe point; the answer says the request
was sent.
Core jobs are known from the lanes' REPORT_STATUS, so a job the agent never reported cannot be
cancelled by name.
"""

from __future__ import annotations

from typing import Final

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import lane_view, locks_view, session_view
from choir.errors import ConflictError, NotFoundError
from choir.protocol import CompactPush, CoreCancelPush, CoreInjectPush
from choir.protocol.log.lanes import CORE_LANE_PREFIX, EDGE_LANE, core_lane, job_name_of
from choir.protocol.operator.answers import (
    CancelRequested,
    CompactRequested,
    InjectRequested,
    SessionCores,
)
from choir.protocol.operator.answers import SessionList as SessionListAnswer
from choir.protocol.operator.requests import (
    SessionCancel,
    SessionCompact,
    SessionInject,
    SessionList,
    SessionRef,
)
from choir.protocol.operator.views import CoreView, LocksView
from choir.store.events import job_open

FINISHED_CORE_STATES: Final = frozenset({"CORE_COMPLETED", "CORE_TERMINATED"})


async def session_list(ctx: OperatorContext, request: SessionList) -> SessionListAnswer:
    """Newest first, of one agent or all: active and recent sessions."""
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
    rows = await ctx.sessions.recent(request.agent_id, request.limit)
    now = ctx.clock()
    return SessionListAnswer(sessions=[session_view(row, now) for row in rows])


async def session_cores(ctx: OperatorContext, request: SessionRef) -> SessionCores:
    """The session's core jobs as their lanes last reported: name, state, skill, step."""
    row = await ctx.sessions.get(request.session_id)
    lanes = ctx.services.status.lanes(row.session_id)
    cores = [
        CoreView(job_name=job_name_of(lane_id), **dict(lane_view(row.session_id, lane)))
        for lane_id, lane in lanes.items()
        if lane_id.startswith(CORE_LANE_PREFIX)
    ]
    return SessionCores(session_id=row.session_id, status=row.status.value, cores=cores)


async def session_locks(ctx: OperatorContext, request: SessionRef) -> LocksView:
    """The session's lock table as its agent last reported it (§9): resource, mode, holders,
    waiters, held for. Empty until the agent reports one, and once the session ended."""
    row = await ctx.sessions.get(request.session_id)
    return locks_view(row.session_id, ctx.services.status.locks(row.session_id))


async def session_cancel(ctx: OperatorContext, request: SessionCancel) -> CancelRequested:
    """Ask the agent to cancel one core job (CoreCancelPush)."""
    session_id = await _running_job(ctx, request.session_id, request.job_name, "cancel")
    ctx.push(session_id, CoreCancelPush(job_name=request.job_name))
    return CancelRequested(session_id=session_id, job_name=request.job_name, requested=True)


async def session_inject(ctx: OperatorContext, request: SessionInject) -> InjectRequested:
    """Give one core job an instruction (CoreInjectPush): it reads it at its next step."""
    session_id = await _running_job(ctx, request.session_id, request.job_name, "instruct")
    ctx.push(session_id, CoreInjectPush(job_name=request.job_name, text=request.text))
    return InjectRequested(session_id=session_id, job_name=request.job_name, requested=True)


async def _running_job(ctx: OperatorContext, session_id: str, job_name: str, verb: str) -> str:
    """The active session's id, once its job `job_name` is known and not finished."""
    row = await ctx.active_session(session_id)
    lane = ctx.services.status.lanes(row.session_id).get(core_lane(job_name))
    if lane is None:
        # started and replicated (its DM card shows it) before its lane's first status report
        async with ctx.pool.acquire() as conn:
            if await job_open(conn, row.session_id, job_name):
                return row.session_id
        raise NotFoundError(
            f"session {row.session_id} has no core job named {job_name!r} "
            f"(see choirctl session cores {row.session_id})"
        )
    if lane.report.state in FINISHED_CORE_STATES:
        raise ConflictError(
            f"core job {job_name} already finished ({lane.report.state}): nothing to {verb}"
        )
    return row.session_id


async def session_compact(ctx: OperatorContext, request: SessionCompact) -> CompactRequested:
    """Ask the agent to compact working memory now (CompactPush), one lane or all."""
    row = await ctx.active_session(request.session_id)
    lane = request.lane
    if (
        lane is not None
        and lane != EDGE_LANE
        and lane not in ctx.services.status.lanes(row.session_id)
    ):
        raise NotFoundError(
            f"session {row.session_id} has no lane {lane!r} "
            f"(see choirctl session cores {row.session_id})"
        )
    ctx.push(row.session_id, CompactPush(lane=lane))
    return CompactRequested(session_id=row.session_id, lane=lane, requested=True)
