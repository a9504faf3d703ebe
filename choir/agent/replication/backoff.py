"""How long an agent waits for an unreachable choird: capped backoff, and the outage it measures.

Its own module, stdlib only, because the start waits on it before INIT_HELLO is answered
(`choir.agent.start_retry`), when nothing heavier than the transport is loaded yet; the
replicator and the config sync wait on the same schedule once the agent serves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter, for retries against an unreachable choird."""

    base_s: float = 0.05
    """The first delay's ceiling."""
    cap_s: float = 2.0
    """No delay exceeds this: once choird is back, the backlog ships within it."""

    def delay(self, attempt: int, rand: float) -> float:
        """Seconds before retry number `attempt` (0-based); `rand` in [0, 1) picks the jitter.

        "Equal jitter": half the ceiling plus a random half, so retries never bunch near zero.
        """
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(attempt, 32))
        return ceiling / 2 + rand * ceiling / 2


@dataclass(slots=True)
class Outage:
    """choird being unreachable, from the first failed call (a heartbeat, a step of the start) to
    the next that goes through.

    Tracks when to retry and what to say, so the outage is logged once, not per attempt.
    """

    backoff: Backoff
    failures: int = 0
    """Failed attempts so far; 0 when choird is reachable."""
    since: float = 0.0
    """When the first attempt failed (loop time)."""
    retry_at: float = 0.0
    """No new attempt before this instant (loop time)."""
    last_error: str = ""

    def failed(self, reason: str, now: float, rand: float) -> bool:
        """Record a failed attempt; True if it starts a new outage (time to log it)."""
        starting = self.failures == 0
        if starting:
            self.since = now
        self.retry_at = now + self.backoff.delay(self.failures, rand)
        self.failures += 1
        self.last_error = reason
        return starting

    def ended(self) -> tuple[int, float] | None:
        """Clear the outage; (attempts, when it began) if there was one."""
        if self.failures == 0:
            return None
        ended = (self.failures, self.since)
        self.failures, self.retry_at, self.last_error = 0, 0.0, ""
        return ended


__all__ = ["Backoff", "Outage"]
