"""Core job tokens (§7.5(3)): derived from the session's lease, bound to one job, shorter-lived.

A job token is `HMAC-SHA256(lease, session_id | job_id | expires_at)`: the agent derives it
locally (it holds the lease), choird checks it against the lease of the session the call
authenticated as. So no second secret crosses the process boundary at start, a token of one
session fails in another (different lease and session id), and a token outlives neither its
expiry nor — choird refuses it once the job's end is replicated — its job.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta
from typing import Final

from pydantic import Field

from choir.protocol.base import WireModel

JOB_TOKEN_TTL: Final = timedelta(minutes=5)
"""How long a job token is valid; the agent derives a fresh one past half of it while the job
runs. The lease has no time expiry (§12.4), so every job token is shorter-lived than it."""
JOB_TOKEN_REFUSED: Final = "job_token_refused"
"""The error code of a host tool result choird refused for its job token."""


class JobToken(WireModel):
    """What a core job's EXECUTE_HOST_TOOL carries besides the lease."""

    job_id: str = Field(min_length=1)
    expires_at: int = Field(ge=0)
    """Unix time in milliseconds after which choird refuses the token."""
    mac: str = Field(repr=False)
    """Hex HMAC-SHA256 of the lease over (session, job, expiry)."""


def _mac(lease_token: str, session_id: str, job_id: str, expires_at: int) -> str:
    message = f"{session_id}|{job_id}|{expires_at}".encode()
    return hmac.new(lease_token.encode(), message, hashlib.sha256).hexdigest()


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def derive_job_token(lease_token: str, session_id: str, job_id: str, now: datetime) -> JobToken:
    """A token for `job_id`, valid `JOB_TOKEN_TTL` from `now`."""
    expires_at = epoch_ms(now + JOB_TOKEN_TTL)
    return JobToken(
        job_id=job_id,
        expires_at=expires_at,
        mac=_mac(lease_token, session_id, job_id, expires_at),
    )


def job_token_problem(
    token: JobToken, *, lease_token: str, session_id: str, now: datetime
) -> str | None:
    """Why `token` is not valid for this session now (one line, no secret), else None."""
    expected = _mac(lease_token, session_id, token.job_id, token.expires_at)
    if not hmac.compare_digest(expected, token.mac):
        return f"the job token of job {token.job_id} was not issued for this session"
    if epoch_ms(now) >= token.expires_at:
        return f"the job token of job {token.job_id} has expired"
    return None
