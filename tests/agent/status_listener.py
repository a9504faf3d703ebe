"""A stand-in for choird's agent listener in the status tests: REPORT_STATUS calls are counted
and kept on choird's real `StatusBoard`; every other verb is acknowledged."""

from __future__ import annotations

from datetime import UTC, datetime

from choir.daemon.agents.status_board import StatusBoard
from choir.protocol import ReportStatusRequest
from choir.transport import Payload, Request


class StatusListener:
    def __init__(self) -> None:
        self.board = StatusBoard()
        self.calls: list[ReportStatusRequest] = []

    async def handle(self, request: Request) -> Payload:
        if request.verb == "REPORT_STATUS":
            report = ReportStatusRequest.model_validate(request.payload)
            self.calls.append(report)
            self.board.report(request.session_id, report, datetime.now(UTC))
        return {"ack": True}

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return False
