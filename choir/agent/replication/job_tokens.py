"""The agent's core job tokens (§7.5(3)): derived from the lease for each running job.

A job's host tool calls carry its token; choird refuses one that expired, belongs to an ended
job or another session (`choir.daemon.agents.job_gate`). A call from the lane of a job that is
no longer running is refused here already, without reaching choird.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from choir.protocol import EDGE_LANE
from choir.protocol.wire.job_tokens import (
    JOB_TOKEN_TTL,
    JobToken,
    derive_job_token,
    epoch_ms,
)

JobOf = Callable[[str], str | None]
"""The id of the job running in a core lane, or None when none runs there now."""


class JobEnded(Exception):
    """A core lane asked for a token, and its job is no longer running."""


class JobTokens:
    """Mints and refreshes each running job's token; the lease never leaves this object."""

    def __init__(
        self,
        lease_token: str,
        session_id: str,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._lease = lease_token
        self._session_id = session_id
        self._clock = clock
        self._tokens: dict[str, JobToken] = {}
        self.job_of: JobOf = lambda lane: None
        """Set by the agent once its core job runner exists."""

    def for_lane(self, lane: str) -> JobToken | None:
        """None for edge (the lease suffices); the running job's token for a core lane.

        Raises `JobEnded` when the lane's job is not running (its token is dropped)."""
        if lane == EDGE_LANE:
            return None
        job_id = self.job_of(lane)
        if job_id is None:
            self._tokens.pop(lane, None)
            raise JobEnded(lane)
        now = self._clock()
        token = self._tokens.get(lane)
        if token is None or not _fresh(token, job_id, now):
            token = derive_job_token(self._lease, self._session_id, job_id, now)
            self._tokens[lane] = token
        return token


def _fresh(token: JobToken, job_id: str, now: datetime) -> bool:
    """Whether `token` is `job_id`'s and has more than half of its lifetime left."""
    half_life_ms = int(JOB_TOKEN_TTL.total_seconds() * 500)
    return token.job_id == job_id and token.expires_at - epoch_ms(now) > half_life_ms
