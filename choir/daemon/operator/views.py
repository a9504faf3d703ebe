"""How stored rows and in-memory reports look on the operator socket (`choir.protocol.operator
.views`).

Pure. Every verb and the live feed describe a session, an approval, a lane or an event the same
way, so the TUI can update a row from a feed item with the code that drew it from a listing.
Timestamps are ISO 8601 strings in UTC; durations are seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from choir.core.held_jobs import held_state, recover_command
from choir.daemon.agents.status_board import LaneReport, LockReport
from choir.daemon.sessions.state import SessionEnded
from choir.protocol.log.lanes import job_name_of
from choir.protocol.operator.views import (
    ApprovalApplyView,
    ApprovalAuditView,
    ApprovalView,
    EventView,
    HeldView,
    LaneView,
    LocksView,
    SessionEndedView,
    SessionView,
)
from choir.protocol.wire.payloads import HeldCall
from choir.store.approvals.audit import AuditRow
from choir.store.approvals.pending import ApprovalRow
from choir.store.events import EventRecord
from choir.store.sessions import SessionRow, SessionStatus

AGENT_STATES = {
    SessionStatus.ACTIVE: "running",
    SessionStatus.CRASHED: "crashed",
    SessionStatus.FORKED: "crashed",
}
"""An agent's state from its latest session's status; anything else is `stopped`."""


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def seconds_between(start: datetime, end: datetime) -> float:
    return round(max((end - start).total_seconds(), 0.0), 3)


def agent_state(latest: SessionRow | None) -> str:
    """`running`, `crashed` or `stopped` (also for an agent that never ran)."""
    return "stopped" if latest is None else AGENT_STATES.get(latest.status, "stopped")


def session_view(row: SessionRow, now: datetime) -> SessionView:
    active = row.status == SessionStatus.ACTIVE
    return SessionView(
        session_id=row.session_id,
        agent_id=row.agent_id,
        status=row.status.value,
        started_at=iso(row.started_at),
        ended_at=iso(row.ended_at),
        uptime_s=seconds_between(row.started_at, now) if active else None,
        last_heartbeat_at=iso(row.last_heartbeat_at),
        ack_rev=row.ack_rev,
        config_version=row.config_version,
        bindings=row.resource_bindings,
    )


def session_ended_view(ended: SessionEnded) -> SessionEndedView:
    return SessionEndedView(
        session_id=ended.session_id,
        agent_id=ended.agent_id,
        status=ended.status.value,
        reason=ended.reason,
    )


def approval_view(
    row: ApprovalRow,
    audit: list[AuditRow] | None = None,
    apply: Mapping[str, Any] | None = None,
) -> ApprovalView:
    return ApprovalView(
        approval_id=row.id,
        agent_id=row.agent_id,
        session_id=row.session_id,
        request_type=row.request_type,
        status=row.status,
        created_at=iso(row.created_at),
        resolved_at=iso(row.resolved_at),
        resolved_by=row.resolved_by,
        payload=row.payload,
        content_sha256=row.content_sha256,
        resolved_via=row.resolved_via,
        outcome=row.outcome,
        apply=None if apply is None else ApprovalApplyView.model_validate(_apply_fields(apply)),
        audit=[
            ApprovalAuditView(
                at=iso(fact.at),
                action=fact.action,
                actor=fact.actor,
                via=fact.via,
                detail=fact.detail,
            )
            for fact in audit or []
        ],
    )


def _apply_fields(apply: Mapping[str, Any]) -> dict[str, Any]:
    return {name: apply[name] for name in ApprovalApplyView.model_fields}


def lane_view(session_id: str, lane: LaneReport) -> LaneView:
    report = lane.report
    return LaneView(
        session_id=session_id,
        lane=report.lane,
        state=report.state,
        skill=report.skill,
        step=report.step,
        budget_remaining=report.budget_remaining,
        reported_at=iso(lane.at),
        held=held_view(session_id, report.lane, report.held) if report.held else None,
    )


def held_view(session_id: str, lane: str, calls: list[HeldCall]) -> HeldView:
    """A core job held after a crash: its calls of unknown outcome, and what decides it."""
    job = job_name_of(lane)
    return HeldView(
        session_id=session_id,
        job_name=job,
        calls=[call.model_dump(mode="json") for call in calls],
        state=held_state([call.tool for call in calls]),
        hint=recover_command(session_id, job),
    )


def locks_view(session_id: str, table: LockReport | None) -> LocksView:
    """The session's lock table; `held_for_s`/`waiting_s` are as of `reported_at`."""
    return LocksView(
        session_id=session_id,
        reported_at=iso(table.at) if table is not None else None,
        locks=[lock.model_dump(mode="json") for lock in table.locks] if table else [],
    )


def event_view(record: EventRecord) -> EventView:
    return EventView(
        rev=record.rev,
        lane=record.lane,
        event_type=record.event_type,
        created_at=iso(record.created_at),
        hash=record.hash,
        payload=record.payload,
        artifact=record.artifact,
    )
