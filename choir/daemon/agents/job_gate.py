"""choird's check of a core job's token (§7.5(3)) before a call of the job is served.

The token's MAC and expiry are checked against the calling session's lease
(`choir.protocol.wire.job_tokens`); a job's end is learned from its replicated `CoreStopped`
(completed, terminated or cancelled), after which every call under its token is refused: a host
tool call (EXECUTE_HOST_TOOL) and a proposal or budget question (REQUEST_APPROVAL). A
restarted choird learns the ends it missed from the stored events, once per session, before its
first check of a token of that session: a token outlives a choird restart by up to its TTL,
its job's end does not get forgotten with it. A session that ends takes its lease with it, so
its jobs' tokens die with the lease check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from choir.daemon.sessions.state import Clock, SessionContext, utc_now
from choir.protocol import CoreStopped, ToolResult
from choir.protocol.wire.job_tokens import JOB_TOKEN_REFUSED, JobToken, job_token_problem
from choir.store.events import ended_jobs

if TYPE_CHECKING:
    from choir.daemon.agents.ingest import Durable
    from choir.store.postgres.pool import Pool


class JobGate:
    """The ended jobs of each live session, and the token check of a job's host tool call."""

    def __init__(self, pool: Pool | None = None, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        """Where the replicated events are (ends this choird did not see); None: memory only."""
        self._clock = clock
        self._ended: dict[str, dict[str, str]] = {}
        """session id -> job id -> how the job ended."""
        self._read: set[str] = set()
        """Sessions whose stored job ends were read since this choird started."""

    def replicated(self, durable: Durable) -> None:
        """An `EventIngest` listener: note the jobs whose end just became durable."""
        for committed in durable.events:
            event = committed.event
            if isinstance(event, CoreStopped):
                ended = self._ended.setdefault(durable.session_id, {})
                ended[event.job_id] = event.outcome

    async def refusal(self, ctx: SessionContext, token: JobToken) -> ToolResult | None:
        """The tool error a call under `token` gets, or None when it may run."""
        problem = await self.problem(ctx, token)
        if problem is None:
            return None
        return ToolResult.fail(JOB_TOKEN_REFUSED, f"{problem}: nothing was run")

    async def problem(self, ctx: SessionContext, token: JobToken) -> str | None:
        """Why a call under `token` must not be served (one line), or None."""
        problem = job_token_problem(
            token, lease_token=ctx.lease_token, session_id=ctx.session_id, now=self._clock()
        )
        if problem is not None:
            return problem
        await self._read_stored(ctx.session_id)
        outcome = self.ended(ctx.session_id, token.job_id)
        if outcome is not None:
            return f"job {token.job_id} has ended ({outcome}); its token no longer works"
        return None

    async def _read_stored(self, session_id: str) -> None:
        if self._pool is None or session_id in self._read:
            return
        async with self._pool.acquire() as conn:
            stored = await ended_jobs(conn, session_id)
        self._ended[session_id] = {**stored, **self._ended.get(session_id, {})}
        self._read.add(session_id)

    def ended(self, session_id: str, job_id: str) -> str | None:
        """How the job ended (completed, terminated, cancelled), or None while choird knows no
        end of it."""
        return self._ended.get(session_id, {}).get(job_id)

    def forget(self, session_id: str) -> None:
        self._ended.pop(session_id, None)
        self._read.discard(session_id)
