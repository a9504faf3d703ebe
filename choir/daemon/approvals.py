"""Approvals (§8.10, §19.6): agents propose, the operator answers once, silence is a rejection.

REQUEST_APPROVAL stores a pending approval. choirctl, the TUI or a DM button answers it through
`approve`/`reject`; unanswered ones time out after `approval_timeout_ms` in `expire_overdue`,
which the daemon runs periodically. Each outcome is told to subscribers exactly once, so the
daemon can push `ApprovalResolvedPush` to the agent and update the DM message. New requests are
told to `subscribe_requests` listeners (the operator feed), so a console shows them at once.

A proposal choird applies (a skill, issue 17) is checked before it is stored (`check`: a skill
that would not load is refused with the reason, for the model to fix) and stored with the
SHA-256 of its content, which the apply must match. Its agent hears the outcome once the apply
ends (`applied` or `failed`, told through `finish`), not when the operator approves. Every
decision is a line of the approval's audit trail: who, through which front end, when.
"""

from __future__ import annotations

import asyncio
import builtins
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from choir.daemon.sessions.state import Clock, SessionContext, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError, NotFoundError
from choir.logs import get_logger
from choir.protocol import ApprovalResolvedPush, RequestApprovalRequest, RequestApprovalResponse
from choir.protocol.wire.pushes import TIMED_OUT_REASON
from choir.store.approvals.audit import add_audit
from choir.store.approvals.pending import (
    ApprovalRow,
    ApprovalStatus,
    expire_approvals,
    get_approval,
    insert_approval,
    list_approvals,
    resolve_approval,
)
from choir.store.postgres.pool import Connection, Pool

log = get_logger("choird.approvals")

TIMEOUT_RESOLVER = "timeout"
"""`resolved_by` of an approval nobody answered in time."""

ResolvedListener = Callable[[ApprovalRow], None]
ProgressListener = Callable[[str, str], None]
"""(approval id, one line): a step of an approved proposal's apply."""
ProposalCheck = Callable[[str, str, dict[str, Any], SessionContext], str | None]
"""(agent id, request type, payload, the proposing session) -> the SHA-256 of the content to
bind the approval to, or None for a kind not bound; raises `UsageError` naming what is wrong
with the proposal."""


CONFIG_CHANGE = "config_change"
BUDGET_EXTENSION = "budget_extension"
"""The request type of a paused core job's question: extend its budget (by how much) or stop."""


def push_of(approval: ApprovalRow) -> ApprovalResolvedPush:
    """What the agent that asked is told when `approval` is resolved."""
    if approval.status == "pending":
        raise ValueError(f"approval {approval.id} is still pending")
    granted = approval.payload.get("granted") if approval.status == "approved" else None
    extend_by = granted if isinstance(granted, int) and granted > 0 else None
    reason = approval.outcome
    if reason is None and approval.resolved_by == TIMEOUT_RESOLVER:
        reason = TIMED_OUT_REASON  # a rejection the agent can tell from a human's
    return ApprovalResolvedPush(
        approval_id=approval.id, status=approval.status, reason=reason, extend_by=extend_by
    )


def front_end(by: str, dm_gateways: dict[str, str]) -> str:
    """Through which front end `by` answered: `choirctl`, `tui`, `timeout`, or a DM's gateway
    type (`telegram`, `console`); `dm_gateways` maps DM names to their gateway's type."""
    if by in (TIMEOUT_RESOLVER, "choirctl"):
        return by
    if by == "choir tui":
        return "tui"
    return dm_gateways.get(by, "other")


def suggested_extension(approval: ApprovalRow) -> int | None:
    """A plain `approve` of a budget question grants the amount the question suggested."""
    if approval.request_type != BUDGET_EXTENSION:
        return None
    suggested = approval.payload.get("suggested")
    return suggested if isinstance(suggested, int) and suggested > 0 else 1


def raises_spend_cap(approval: ApprovalRow) -> bool:
    """A budget question that would let the agent spend beyond the cap the operator set: a
    user's (regular) DM may stop it but not allow it."""
    budget = approval.payload.get("budget")
    return (
        approval.request_type == BUDGET_EXTENSION
        and isinstance(budget, str)
        and budget.startswith("spend_cap_")
    )


def outside_its_agent(approval: ApprovalRow) -> bool:
    """A config change that touches more of config.json than its own agent's entry: a user's
    (regular) DM answers only for its bound agent (§19.1), so it may reject it, not apply it."""
    if approval.request_type != CONFIG_CHANGE:
        return False
    patch = approval.payload.get("patch")
    agents = patch.get("agents") if isinstance(patch, dict) else None
    return not (
        isinstance(patch, dict)
        and set(patch) == {"agents"}
        and isinstance(agents, dict)
        and set(agents) == {approval.agent_id}
    )


class ApprovalService:
    """Pending approvals over `choir_control.pending_approvals`."""

    def __init__(
        self,
        pool: Pool,
        stage: ConfigStage,
        *,
        clock: Clock = utc_now,
        check: ProposalCheck | None = None,
    ) -> None:
        self._pool = pool
        self._stage = stage
        self._clock = clock
        self.check = check
        """Set by choird where it knows the agents' repos; None checks nothing."""
        self._listeners: list[ResolvedListener] = []
        self._requested: list[ResolvedListener] = []
        self._progress: list[ProgressListener] = []

    async def request(
        self, ctx: SessionContext, request: RequestApprovalRequest
    ) -> RequestApprovalResponse:
        """REQUEST_APPROVAL: check the proposal, store it as pending."""
        content = None
        if self.check is not None:  # reads the repos (git): off the event loop
            content = await asyncio.to_thread(
                self.check, ctx.agent_id, request.request_type, request.payload, ctx
            )
        async with self._pool.acquire() as conn:
            row = await insert_approval(
                conn,
                f"ap-{secrets.token_hex(6)}",
                session_id=ctx.session_id,
                agent_id=ctx.agent_id,
                request_type=request.request_type,
                payload=request.payload,
                now=self._clock(),
                content_sha256=content,
            )
            detail = f"sha256 {content}" if content else ""
            await add_audit(
                conn, row.id, "requested", at=row.created_at, actor=ctx.agent_id, detail=detail
            )
        log.info(
            "approval requested",
            fields={"approval_id": row.id, "agent_id": row.agent_id, "type": row.request_type},
        )
        for listener in list(self._requested):
            listener(row)
        return RequestApprovalResponse(approval_id=row.id, status="pending")

    async def list(
        self, *, status: ApprovalStatus | None = "pending", agent_id: str | None = None
    ) -> list[ApprovalRow]:
        """Approvals oldest first; by default the pending ones of every agent."""
        async with self._pool.acquire() as conn:
            return await list_approvals(conn, status=status, agent_id=agent_id)

    async def show(self, approval_id: str) -> ApprovalRow:
        async with self._pool.acquire() as conn:
            row = await get_approval(conn, approval_id)
        if row is None:
            raise NotFoundError(f"no approval {approval_id!r} (see choirctl approval list)")
        return row

    async def approve(
        self, approval_id: str, *, by: str, agent_id: str | None = None, restart: bool = False
    ) -> ApprovalRow:
        """Approve a pending approval; `agent_id` limits it to that agent's (a regular DM).

        A budget question approved as such grants the amount it suggested; a config change
        records whether the approver chose to `restart` what it needs."""
        return await self._resolve(
            approval_id, "approved", by, agent_id, granted=None, restart=restart
        )

    async def extend(
        self, approval_id: str, amount: int, *, by: str, agent_id: str | None = None
    ) -> ApprovalRow:
        """Answer a paused job's budget question: extend the budget by `amount`."""
        return await self._resolve(approval_id, "approved", by, agent_id, granted=amount)

    async def reject(
        self, approval_id: str, *, by: str, agent_id: str | None = None
    ) -> ApprovalRow:
        return await self._resolve(approval_id, "rejected", by, agent_id)

    async def expire_overdue(self) -> builtins.list[ApprovalRow]:
        """Time out approvals pending longer than `approval_timeout_ms` (§19.6: rejected)."""
        now = self._clock()
        timeout = timedelta(milliseconds=self._stage.running.config.approval_timeout_ms)
        async with self._pool.acquire() as conn:
            expired = await expire_approvals(
                conn, created_before=now - timeout, now=now, by=TIMEOUT_RESOLVER
            )
            for row in expired:
                await self._audit_decision(conn, row)
        for row in expired:
            self._resolved(row)
        return expired

    def subscribe(self, listener: ResolvedListener) -> Callable[[], None]:
        """Call `listener` with every approval once it is resolved; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def subscribe_progress(self, listener: ProgressListener) -> Callable[[], None]:
        """Call `listener` with (approval id, line) for each step of an apply; returns the
        unsubscribe."""
        self._progress.append(listener)
        return lambda: self._progress.remove(listener)

    def progressed(self, approval_id: str, line: str) -> None:
        """An apply finished (or undid) a step: tell the subscribers (the DMs' approval
        messages)."""
        for listener in list(self._progress):
            listener(approval_id, line)

    def subscribe_requests(self, listener: ResolvedListener) -> Callable[[], None]:
        """Call `listener` with every new (pending) approval; returns the unsubscribe."""
        self._requested.append(listener)
        return lambda: self._requested.remove(listener)

    async def _resolve(
        self,
        approval_id: str,
        status: Literal["approved", "rejected"],
        by: str,
        agent_id: str | None,
        *,
        granted: int | None = None,
        restart: bool = False,
    ) -> ApprovalRow:
        current = await self.show(approval_id)
        if agent_id is not None and current.agent_id != agent_id:
            raise ConflictError(
                f"approval {approval_id} belongs to {current.agent_id}, not {agent_id}: "
                "only an admin DM or choirctl can answer it"
            )
        if agent_id is not None and status == "approved" and raises_spend_cap(current):
            raise ConflictError(
                f"approval {approval_id} asks to spend beyond {current.agent_id}'s spend cap: "
                "only an admin DM, choirctl or the console can allow that (reject stops it)"
            )
        if agent_id is not None and status == "approved" and outside_its_agent(current):
            raise ConflictError(
                f"approval {approval_id} changes config.json beyond agents.{current.agent_id}: "
                "only an admin DM, choirctl or the console can approve it (reject drops it)"
            )
        if granted is not None and current.request_type != BUDGET_EXTENSION:
            raise ConflictError(
                f"approval {approval_id} is a {current.request_type} proposal, not a budget "
                "question: approve or reject it"
            )
        if status == "approved" and granted is None:
            granted = suggested_extension(current)
        via = front_end(by, self._dm_gateways())
        async with self._pool.acquire() as conn:
            chosen = restart if current.request_type == CONFIG_CHANGE else None
            row = await resolve_approval(
                conn,
                approval_id,
                status,
                by=by,
                now=self._clock(),
                via=via,
                granted=granted,
                restart=chosen,
            )
            if row is None:
                latest = await get_approval(conn, approval_id) or current
                outcome = latest.status.replace("_", " ")
                raise ConflictError(f"approval {approval_id} is already {outcome}")
            await self._audit_decision(conn, row)
        self._resolved(row)
        return row

    def finish(self, row: ApprovalRow) -> None:
        """An approved proposal's apply ended (`applied` or `failed`): tell the subscribers."""
        self._resolved(row)

    def via(self, by: str) -> str:
        """The front end `by` answers through (`front_end`)."""
        return front_end(by, self._dm_gateways())

    def _dm_gateways(self) -> dict[str, str]:
        config = self._stage.running.config
        types = {name: gateway.type for name, gateway in config.gateways.items()}
        return {name: types.get(dm.gateway, "other") for name, dm in config.dms.items()}

    @staticmethod
    async def _audit_decision(conn: Connection, row: ApprovalRow) -> None:
        assert row.resolved_at is not None  # a decided row
        timeout = (
            " (timeout: silence is a rejection)" if row.resolved_by == TIMEOUT_RESOLVER else ""
        )
        await add_audit(
            conn,
            row.id,
            row.status,
            at=row.resolved_at,
            actor=row.resolved_by,
            via=row.resolved_via,
            detail=f"content sha256 {row.content_sha256}{timeout}"
            if row.content_sha256
            else timeout.strip(),
        )

    def _resolved(self, row: ApprovalRow) -> None:
        log.info(
            "approval resolved",
            fields={"approval_id": row.id, "status": row.status, "by": row.resolved_by},
        )
        for listener in list(self._listeners):
            listener(row)
