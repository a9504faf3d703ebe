"""REPORT_STATUS: the latest state of every lane of every session, for status and the TUI.

A report may also carry the agent's whole lock table (when it changed); the board keeps the
latest table per session and tells its lock listeners (the operator feed's `locks` items).

Kept in memory only — a lane's state is news, not history (the event log is the history). A
session's lanes are dropped when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from choir.protocol import LockState, ReportStatusRequest
from choir.protocol.wire.payloads import HeldCall


@dataclass(frozen=True, slots=True)
class LaneReport:
    report: ReportStatusRequest
    at: datetime
    """When choird received it."""


@dataclass(frozen=True, slots=True)
class LockReport:
    locks: tuple[LockState, ...]
    """Every held or awaited resource, as the agent last reported them."""
    at: datetime
    """When choird received the table (its `held_for_s`/`waiting_s` are as of then)."""


LaneListener = Callable[[str, LaneReport], None]
"""Told (session id, the lane's new report) on every REPORT_STATUS."""
LockListener = Callable[[str, LockReport], None]
"""Told (session id, its new lock table) when a report carries one."""


class StatusBoard:
    """session id -> lane id -> the lane's latest report."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, LaneReport]] = {}
        self._listeners: list[LaneListener] = []
        self._locks: dict[str, LockReport] = {}
        self._lock_listeners: list[LockListener] = []

    def report(self, session_id: str, report: ReportStatusRequest, at: datetime) -> None:
        lane = LaneReport(report, at)
        self._sessions.setdefault(session_id, {})[report.lane] = lane
        for listener in list(self._listeners):
            listener(session_id, lane)
        if report.locks is not None:
            table = self._locks[session_id] = LockReport(tuple(report.locks), at)
            for lock_listener in list(self._lock_listeners):
                lock_listener(session_id, table)

    def subscribe(self, listener: LaneListener) -> Callable[[], None]:
        """Call `listener` on every report (the operator feed, the TUI); returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def subscribe_locks(self, listener: LockListener) -> Callable[[], None]:
        """Call `listener` on every new lock table; returns the unsubscribe."""
        self._lock_listeners.append(listener)
        return lambda: self._lock_listeners.remove(listener)

    def locks(self, session_id: str) -> LockReport | None:
        """The session's latest lock table; None before its agent reported one."""
        return self._locks.get(session_id)

    def lanes(self, session_id: str) -> dict[str, LaneReport]:
        """The session's lanes, edge first, then core jobs by lane id."""
        lanes = self._sessions.get(session_id, {})
        return {
            lane: lanes[lane] for lane in sorted(lanes, key=lambda lane: (lane != "edge", lane))
        }

    def held(self) -> dict[str, dict[str, list[HeldCall]]]:
        """Core jobs held after a crash, as their agents reported them: session id -> lane ->
        the calls whose outcome is unknown. A decision's next report clears a job."""
        held: dict[str, dict[str, list[HeldCall]]] = {}
        for session_id in self._sessions:
            for lane, reported in self.lanes(session_id).items():
                if reported.report.held:
                    held.setdefault(session_id, {})[lane] = list(reported.report.held)
        return held

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._locks.pop(session_id, None)
