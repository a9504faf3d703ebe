"""A circuit breaker for the embedding endpoint, pure: when to stop calling it, when to try again.

    CLOSED --K consecutive failed batches--> OPEN --cool-down over, one probe--> HALF_OPEN
    HALF_OPEN --probe succeeds--> CLOSED;  HALF_OPEN --probe fails--> OPEN (a new cool-down)
    HALF_OPEN --probe abandoned (its caller cancelled)--> OPEN (cool-down over: probe again)

Each batch already carries §11.9's retries (1/2/4 s), so a dead endpoint costs ~7 s per batch;
without a breaker every queued batch would pay that, one after the other, and a session close
would take minutes to store chunks that end up without vectors anyway. While OPEN, batches are
refused at once (their chunks are stored without vectors, found by text, backfilled later).

Every method takes the time (`time.monotonic()`), so tests step through the states exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    """Calls go through."""
    OPEN = "open"
    """Calls are refused until the cool-down ends."""
    HALF_OPEN = "half_open"
    """One probe call is in flight; the others are refused until it ends."""


class Change(StrEnum):
    """What a recorded outcome did to the breaker, for the caller to log."""

    OPENED = "opened"
    """K failures in a row: the outage starts (one warning)."""
    REOPENED = "reopened"
    """The probe failed: the outage goes on (no new warning)."""
    RECOVERED = "recovered"
    """A call succeeded after failures: the outage is over."""


@dataclass(slots=True)
class CircuitBreaker:
    """Counts consecutive failures of one endpoint and decides whether to call it."""

    threshold: int = 3
    """Consecutive failed batches that open the breaker."""
    cooldown_s: float = 30.0
    """How long an open breaker refuses calls before one probe is let through."""
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    """Consecutive failed calls, reset by a success."""
    opened_at: float = 0.0

    def allow(self, now: float) -> bool:
        """Whether a call may go out now; at the end of a cool-down, the one probe may."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN and now - self.opened_at >= self.cooldown_s:
            self.state = BreakerState.HALF_OPEN
            return True
        return False

    def refusing(self, now: float) -> bool:
        """Whether a call would be refused now: cooling down, or the probe not back yet. Once
        the cool-down is over this is False, so whoever calls next — a search's query too, not
        only a batch — is the probe, and an endpoint that came back is found again."""
        if self.state is BreakerState.OPEN:
            return now - self.opened_at < self.cooldown_s
        return self.state is BreakerState.HALF_OPEN

    def abandoned(self) -> None:
        """The probe never finished (its caller gave up waiting: a search's timeout): open as
        before, the cool-down still over, so the next call probes again — else the breaker
        would wait for an outcome that never comes and refuse every call from then on."""
        if self.state is BreakerState.HALF_OPEN:
            self.state = BreakerState.OPEN

    def succeeded(self) -> Change | None:
        """A call went through: close; RECOVERED when there had been failures."""
        failed, self.failures, self.state = self.failures, 0, BreakerState.CLOSED
        return Change.RECOVERED if failed else None

    def failed(self, now: float) -> Change | None:
        """A call failed: OPENED at the threshold, REOPENED when the probe failed."""
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN:
            self.state, self.opened_at = BreakerState.OPEN, now
            return Change.REOPENED
        if self.state is BreakerState.CLOSED and self.failures >= self.threshold:
            self.state, self.opened_at = BreakerState.OPEN, now
            return Change.OPENED
        return None
