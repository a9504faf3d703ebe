"""REPORT_STATUS: the latest state of every lane of every session, for status and the TUI.

Kept in memory only — a lane's state is news, not history (the event log is the history). A
session's lanes are dropped when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from choir.protocol import ReportStatusRequest


@dataclass(frozen=True, slots=True)
class LaneReport:
    report: ReportStatusRequest
    at: datetime
    """When choird received it."""


LaneListener = Callable[[str, LaneReport], None]
"""Told (session id, the lane's new report) on every REPORT_STATUS."""


class StatusBoard:
    """session id -> lane id -> the lane's latest report."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, LaneReport]] = {}
        self._listeners: list[LaneListener] = []

    def report(self, session_id: str, report: ReportStatusRequest, at: datetime) -> None:
        lane = LaneReport(report, at)
        self._sessions.setdefault(session_id, {})[report.lane] = lane
        for listener in list(self._listeners):
            listener(session_id, lane)

    def subscribe(self, listener: LaneListener) -> Callable[[], None]:
        """Call `listener` on every report (the operator feed, the TUI); returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def lanes(self, session_id: str) -> dict[str, LaneReport]:
        """The session's lanes, edge first, then core jobs by lane id."""
        lanes = self._sessions.get(session_id, {})
        return {
            lane: lanes[lane] for lane in sorted(lanes, key=lambda lane: (lane != "edge", lane))
        }

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
