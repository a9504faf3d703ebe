"""`inbox.list` and `inbox.resolve`: the recovery inbox (issue 19) — everything waiting for a
human after a restart, in one place.

Not the message inbox of the DMs (`choir.daemon.gateway.inbox`): this one holds *decisions*.
Each item is read from where its facts are durable — held jobs from what running agents report
and the session log, unknown outcomes of crashed sessions from the log, approvals from their
table, failed applies and approvals timed out while choird was down from
`choir.store.recovery_items` — so it is the same after any restart. Resolving one runs the verb
that owns it (`session.recover`, `agent.start`, `approval.approve|reject`, `agent.update`);
an item decided elsewhere meanwhile is a conflict that says so (exit 5). The kinds and their
choices are `choir.core.recovery_inbox`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from choir.core import recovery_inbox as rules
from choir.core.recovery_inbox import Kind
from choir.daemon.operator.agents import lifecycle as operator_lifecycle
from choir.daemon.operator.agents.update import update_one
from choir.daemon.operator.approvals import verbs as operator_approvals
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.recovery import recover as operator_recover
from choir.errors import ConflictError, NotFoundError, UsageError
from choir.protocol.base import WireModel
from choir.protocol.log.lanes import core_lane, job_name_of
from choir.protocol.operator.answers import InboxItemView, InboxResolved
from choir.protocol.operator.answers import InboxList as InboxListAnswer
from choir.protocol.operator.requests import (
    AgentStart,
    ApprovalAnswer,
    InboxList,
    InboxResolve,
    SessionRecover,
)
from choir.store.approvals.pending import ApprovalRow
from choir.store.open_intents import OpenIntent, open_intents, unanswered_intents
from choir.store.recovery_items import RecoveryItem, decide, get_item, open_items
from choir.store.sessions import SessionStatus

T = TypeVar("T")


# -- listing ----------------------------------------------------------------------------------


async def inbox_list(ctx: OperatorContext, request: InboxList) -> InboxListAnswer:
    """Every item, oldest first; with `agent_id`, that agent's only."""
    if request.agent_id is not None:
        ctx.require_agent(request.agent_id)
    items = await collect(ctx)
    if request.agent_id is not None:
        items = [item for item in items if item.agent_id == request.agent_id]
    return InboxListAnswer(items=items)


async def collect(ctx: OperatorContext) -> list[InboxItemView]:
    """What waits for a human now, oldest first."""
    async with ctx.pool.acquire() as conn:
        stored = await open_items(conn)
    noted = {item.subject for item in stored if item.kind == "approval_timed_out"}
    items = [
        *await _held_jobs(ctx),
        *await _unknown_outcomes(ctx),
        *[_approval(row) for row in await ctx.services.approvals.list() if row.id not in noted],
        *[_stored(item) for item in stored],
    ]
    return sorted(items, key=lambda item: (item.since, item.item_id))


async def _held_jobs(ctx: OperatorContext) -> list[InboxItemView]:
    items = []
    for session_id, lanes in ctx.services.status.held().items():
        row = await ctx.sessions.get(session_id)
        calls = await _calls(ctx, session_id)
        for lane in lanes:
            job = job_name_of(lane) or lane
            held = [call for call in calls if call.lane == lane]
            items.append(
                _item(
                    rules.held_id(session_id, job),
                    "held_job",
                    row.agent_id,
                    session_id,
                    f"{row.agent_id}: core job {job} held, a call's outcome is unknown",
                    [rules.call_line(c.tool, c.arguments) for c in held],
                    (held[0].created_at if held else row.started_at).isoformat(),
                )
            )
    return items


async def _unknown_outcomes(ctx: OperatorContext) -> list[InboxItemView]:
    """Each agent's crashed last session with calls of unknown outcome (its agent is down)."""
    items = []
    for agent_id in sorted(ctx.config.agents):
        row = await ctx.latest_session(agent_id)
        if row is None or row.status != SessionStatus.CRASHED:
            continue
        calls = await _calls(ctx, row.session_id)
        if not calls:
            continue
        items.append(
            _item(
                rules.outcome_id(row.session_id),
                "unknown_outcome",
                agent_id,
                row.session_id,
                f"{agent_id}: session crashed with {len(calls)} call(s) of unknown outcome; "
                "resume starts it (held jobs then wait here)",
                [rules.call_line(c.tool, c.arguments) for c in calls],
                calls[0].created_at.isoformat(),
            )
        )
    return items


def _approval(row: ApprovalRow) -> InboxItemView:
    return _item(
        rules.approval_id_of(row.id),
        "approval",
        row.agent_id,
        row.session_id,
        f"{row.agent_id}: approval {row.id} ({row.request_type}) waits for an answer",
        rules.proposal_lines(row.request_type, row.payload),
        row.created_at.isoformat(),
    )


def _stored(item: RecoveryItem) -> InboxItemView:
    if item.kind == "approval_timed_out":
        title = f"{item.agent_id}: approval {item.subject} timed out while choird was down"
    else:
        title = f"{item.agent_id}: {item.subject} failed"
    return _item(
        item.item_id,
        item.kind,
        item.agent_id,
        item.session_id,
        title,
        [item.reason],
        item.created_at.isoformat(),
    )


def _item(
    item_id: str,
    kind: Kind,
    agent_id: str | None,
    session_id: str | None,
    title: str,
    context: list[str],
    since: str,
) -> InboxItemView:
    return InboxItemView(
        item_id=item_id,
        kind=kind,
        agent_id=agent_id,
        session_id=session_id,
        title=title,
        context=context,
        since=since,
        choices=list(rules.CHOICES[kind]),
        hint=rules.resolve_command(item_id, kind),
    )


async def _calls(ctx: OperatorContext, session_id: str) -> list[OpenIntent]:
    """The session's intents without a result, oldest first: a few queries, not the whole log
    (a long session's is tens of thousands of events, and the inbox is listed on every
    refresh)."""
    async with ctx.pool.acquire() as conn:
        return await open_intents(conn, session_id)


# -- resolving --------------------------------------------------------------------------------


async def inbox_resolve(ctx: OperatorContext, request: InboxResolve) -> InboxResolved:
    """Decide one item through the verb that owns it."""
    ref = rules.parse_item_id(request.item_id)
    if ref is None:
        raise NotFoundError(
            f"no inbox item {request.item_id!r}: ids look like held:<session>:<job>, "
            "outcome:<session>, approval:<id>, timeout:<id> or apply-<id> (see choirctl inbox)"
        )
    if request.choice not in rules.CHOICES[ref.kind]:
        raise UsageError(
            f"{request.item_id} is a {ref.kind} item: choose one of "
            f"{', '.join(rules.CHOICES[ref.kind])}, not {request.choice}"
        )
    outcome, answer = await _dispatch(ctx, ref, request)
    return InboxResolved(
        item_id=request.item_id,
        choice=request.choice,
        outcome=outcome,
        answer=answer.model_dump(mode="json") if answer is not None else {},
    )


async def _dispatch(
    ctx: OperatorContext, ref: rules.ItemRef, request: InboxResolve
) -> tuple[str, WireModel | None]:
    item, choice = request.item_id, request.choice
    match ref.kind:
        case "held_job":
            assert ref.session_id is not None
            assert ref.job_name is not None
            lane = core_lane(ref.job_name)
            async with ctx.pool.acquire() as conn:  # no arguments: none are shown
                calls = await unanswered_intents(conn, ref.session_id)
            if not any(c.lane == lane for c in calls):
                raise _already(item, f"core job {ref.job_name} holds no call of unknown outcome")
            recover = SessionRecover.model_validate(
                {"session_id": ref.session_id, "job_name": ref.job_name, "choice": choice}
            )
            answer: WireModel = await operator_recover.session_recover(ctx, recover)
            return f"asked the agent to {choice.replace('_', ' ')} core job {ref.job_name}", answer
        case "unknown_outcome":
            assert ref.session_id is not None
            row = await ctx.sessions.get(ref.session_id)
            if row.status != SessionStatus.CRASHED:
                raise _already(item, f"session {row.session_id} is {row.status.value} now")
            start = AgentStart(agent_id=row.agent_id, resume=row.session_id)
            started = await operator_lifecycle.agent_start(ctx, start)
            return f"started {row.agent_id}, resuming session {row.session_id}", started
        case "approval":
            assert ref.approval_id is not None
            answer_of = (
                operator_approvals.approval_approve
                if choice == "approve"
                else operator_approvals.approval_reject
            )
            answered = ApprovalAnswer(approval_id=ref.approval_id, by=request.by)
            view = await _decided_elsewhere(item, answer_of(ctx, answered))
            return f"approval {ref.approval_id} {view.status}", view
        case "approval_timed_out":
            await _claim(ctx, item, choice, request.by)
            return "dismissed: the agent was told the approval timed out", None
        case "failed_apply":
            stored = await _claim(ctx, item, choice, request.by)
            if choice == "dismiss":
                return "dismissed", None
            if stored.agent_id is None:
                raise ConflictError(f"{item} names no agent to update again")
            result = await update_one(ctx, stored.agent_id, lambda _: None)
            return f"agent update {stored.agent_id}: {result.outcome} ({result.reason})", result


async def _claim(ctx: OperatorContext, item_id: str, choice: str, by: str) -> RecoveryItem:
    """Decide a stored item, once: the loser of a race is told it was decided elsewhere."""
    async with ctx.pool.acquire() as conn:
        claimed = await decide(conn, item_id, choice, by=by, now=ctx.clock())
        if claimed is not None:
            return claimed
        current = await get_item(conn, item_id)
    if current is None:
        raise NotFoundError(f"no inbox item {item_id!r} (see choirctl inbox)")
    raise _already(item_id, f"{current.choice} by {current.decided_by}")


async def _decided_elsewhere(item_id: str, work: Awaitable[T]) -> T:
    """Run the owning verb; its conflict (nothing left to decide) says which item it was."""
    try:
        return await work
    except ConflictError as error:
        raise _already(item_id, error.message) from None


def _already(item_id: str, how: str) -> ConflictError:
    return ConflictError(f"inbox item {item_id} was already decided elsewhere: {how}")
