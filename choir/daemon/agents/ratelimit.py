"""Per-session request limits of the agent-facing API: a token bucket and a payload cap.

A container that loops on a verb, or sends a giant payload, is refused with a clear error
instead of starving choird. The bucket holds one second of burst (`rpc.rate_limit_per_s`
requests) and refills continuously; the rate is read on every check, so a config apply changes
it for running sessions too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from choir.daemon.agents.refusals import RpcFault
from choir.protocol import ErrorCode


@dataclass(slots=True)
class TokenBucket:
    """`rate` tokens per second, at most `rate` saved up; pure apart from the times passed in."""

    tokens: float
    updated: float

    def take(self, rate: float, now: float) -> bool:
        """Spend one token if there is one."""
        self.tokens = min(rate, self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class RateLimiter:
    """One bucket per session."""

    def __init__(
        self, rate_per_s: Callable[[], int], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = rate_per_s
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, session_id: str) -> None:
        """Count one request of the session; raises `rate_limited` when over the limit."""
        rate, now = self._rate(), self._clock()
        bucket = self._buckets.setdefault(session_id, TokenBucket(float(rate), now))
        if not bucket.take(rate, now):
            raise RpcFault(
                ErrorCode.RATE_LIMITED,
                f"more than {rate} requests per second (rpc.rate_limit_per_s): slow down and retry",
            )

    def forget(self, session_id: str) -> None:
        self._buckets.pop(session_id, None)


def check_payload_size(size: int, limit: int) -> None:
    """Refuse a request payload larger than `rpc.max_payload_bytes`."""
    if size > limit:
        raise RpcFault(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"payload of {size} bytes exceeds rpc.max_payload_bytes ({limit}): send less per "
            "call (heartbeats: fewer patches each)",
        )
