"""REPORT_STATUS: the latest state of every lane of every session, for status and the TUI.

Kept in memory only — a lane's state is news, not history (the event log is the history). A
session's lanes are dropped when it ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from choir.protocol import ReportStatusRequest


@dataclass(frozen=True, slots=True)
class LaneReport:
    report: ReportStatusRequest
    at: datetime
    """When choird received it."""


class StatusBoard:
    """session id -> lane id -> the lane's latest report."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, LaneReport]] = {}

    def report(self, session_id: str, report: ReportStatusRequest, at: datetime) -> None:
        self._sessions.setdefault(session_id, {})[report.lane] = LaneReport(report, at)

    def lanes(self, session_id: str) -> dict[str, LaneReport]:
        """The session's lanes, edge first, then core jobs by lane id."""
        lanes = self._sessions.get(session_id, {})
        return {
            lane: lanes[lane] for lane in sorted(lanes, key=lambda lane: (lane != "edge", lane))
        }

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
