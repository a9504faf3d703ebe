"""Approvals (§8.10, §19.6): agents propose, the operator answers once, silence is a rejection.

REQUEST_APPROVAL stores a pending approval. choirctl, the TUI or a DM button answers it through
`approve`/`reject`; unanswered ones time out after `approval_timeout_ms` in `expire_overdue`,
which the daemon runs periodically. Each outcome is told to subscribers exactly once, so the
daemon can push `ApprovalResolvedPush` to the agent and update the DM message. New requests are
told to `subscribe_requests` listeners (the operator feed), so a console shows them at once.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from choir.daemon.sessions.state import Clock, SessionContext, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError, NotFoundError
from choir.logs import get_logger
from choir.protocol import ApprovalResolvedPush, RequestApprovalRequest, RequestApprovalResponse
from choir.store.approvals import (
    ApprovalRow,
    ApprovalStatus,
    expire_approvals,
    get_approval,
    insert_approval,
    list_approvals,
    resolve_approval,
)
from choir.store.postgres.pool import Pool

log = get_logger("choird.approvals")

TIMEOUT_RESOLVER = "timeout"
"""`resolved_by` of an approval nobody answered in time."""

ResolvedListener = Callable[[ApprovalRow], None]


BUDGET_EXTENSION = "budget_extension"
"""The request type of a paused core job's question: extend its budget (by how much) or stop."""


def push_of(approval: ApprovalRow) -> ApprovalResolvedPush:
    """What the agent that asked is told when `approval` is resolved."""
    if approval.status == "pending":
        raise ValueError(f"approval {approval.id} is still pending")
    granted = approval.payload.get("granted") if approval.status == "approved" else None
    extend_by = granted if isinstance(granted, int) and granted > 0 else None
    return ApprovalResolvedPush(
        approval_id=approval.id, status=approval.status, extend_by=extend_by
    )


def suggested_extension(approval: ApprovalRow) -> int | None:
    """A plain `approve` of a budget question grants the amount the question suggested."""
    if approval.request_type != BUDGET_EXTENSION:
        return None
    suggested = approval.payload.get("suggested")
    return suggested if isinstance(suggested, int) and suggested > 0 else 1


class ApprovalService:
    """Pending approvals over `choir_control.pending_approvals`."""

    def __init__(self, pool: Pool, stage: ConfigStage, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        self._stage = stage
        self._clock = clock
        self._listeners: list[ResolvedListener] = []
        self._requested: list[ResolvedListener] = []

    async def request(
        self, ctx: SessionContext, request: RequestApprovalRequest
    ) -> RequestApprovalResponse:
        """REQUEST_APPROVAL: store the proposal as pending."""
        async with self._pool.acquire() as conn:
            row = await insert_approval(
                conn,
                f"ap-{secrets.token_hex(6)}",
                session_id=ctx.session_id,
                agent_id=ctx.agent_id,
                request_type=request.request_type,
                payload=request.payload,
                now=self._clock(),
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
        self, approval_id: str, *, by: str, agent_id: str | None = None
    ) -> ApprovalRow:
        """Approve a pending approval; `agent_id` limits it to that agent's (a regular DM).

        A budget question approved as such grants the amount it suggested."""
        return await self._resolve(approval_id, "approved", by, agent_id, granted=None)

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
            self._resolved(row)
        return expired

    def subscribe(self, listener: ResolvedListener) -> Callable[[], None]:
        """Call `listener` with every approval once it is resolved; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

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
    ) -> ApprovalRow:
        current = await self.show(approval_id)
        if agent_id is not None and current.agent_id != agent_id:
            raise ConflictError(
                f"approval {approval_id} belongs to {current.agent_id}, not {agent_id}: "
                "only an admin DM or choirctl can answer it"
            )
        if granted is not None and current.request_type != BUDGET_EXTENSION:
            raise ConflictError(
                f"approval {approval_id} is a {current.request_type} proposal, not a budget "
                "question: approve or reject it"
            )
        if status == "approved" and granted is None:
            granted = suggested_extension(current)
        async with self._pool.acquire() as conn:
            row = await resolve_approval(
                conn, approval_id, status, by=by, now=self._clock(), granted=granted
            )
            if row is None:
                latest = await get_approval(conn, approval_id) or current
                outcome = latest.status.replace("_", " ")
                raise ConflictError(f"approval {approval_id} is already {outcome}")
        self._resolved(row)
        return row

    def _resolved(self, row: ApprovalRow) -> None:
        log.info(
            "approval resolved",
            fields={"approval_id": row.id, "status": row.status, "by": row.resolved_by},
        )
        for listener in list(self._listeners):
            listener(row)
