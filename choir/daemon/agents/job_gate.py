"""choird's check of a core job's token (§7.5(3)) before its host tool call runs.

The token's MAC and expiry are checked against the calling session's lease
(`choir.protocol.wire.job_tokens`); a job's end is learned from its replicated `CoreStopped`
(completed, terminated or cancelled), after which every call under its token is refused. A
session that ends takes its lease with it, so its jobs' tokens die with the lease check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from choir.daemon.sessions.state import Clock, SessionContext, utc_now
from choir.protocol import CoreStopped, ToolResult
from choir.protocol.wire.job_tokens import JOB_TOKEN_REFUSED, JobToken, job_token_problem

if TYPE_CHECKING:
    from choir.daemon.agents.ingest import Durable


class JobGate:
    """The ended jobs of each live session, and the token check of a job's host tool call."""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self._clock = clock
        self._ended: dict[str, dict[str, str]] = {}
        """session id -> job id -> how the job ended."""

    def replicated(self, durable: Durable) -> None:
        """An `EventIngest` listener: note the jobs whose end just became durable."""
        for committed in durable.events:
            event = committed.event
            if isinstance(event, CoreStopped):
                ended = self._ended.setdefault(durable.session_id, {})
                ended[event.job_id] = event.outcome

    def refusal(self, ctx: SessionContext, token: JobToken) -> ToolResult | None:
        """The tool error a call under `token` gets, or None when it may run."""
        problem = job_token_problem(
            token, lease_token=ctx.lease_token, session_id=ctx.session_id, now=self._clock()
        )
        outcome = self.ended(ctx.session_id, token.job_id)
        if problem is None and outcome is not None:
            problem = f"job {token.job_id} has ended ({outcome}); its token no longer works"
        if problem is None:
            return None
        return ToolResult.fail(JOB_TOKEN_REFUSED, f"{problem}: nothing was run")

    def ended(self, session_id: str, job_id: str) -> str | None:
        """How the job ended (completed, terminated, cancelled), or None while choird knows no
        end of it."""
        return self._ended.get(session_id, {}).get(job_id)

    def forget(self, session_id: str) -> None:
        self._ended.pop(session_id, None)
