"""§11.9's retry schedule, pure: how long to wait before the next try, or stop.

Exponential from `base_s` (1, 2, 4 s by default), three retries, each wait scaled by a random
factor in [1 - jitter, 1 + jitter) so that the chunks of many agents failing together do not
come back together. A 429 that asks for a longer wait (`Retry-After`) gets it, up to `max_wait_s`;
asked for more, the call stops: the chunk is stored without a vector and backfilled later.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """When to try an embedding call again."""

    base_s: float = 1.0
    """The first wait; each next one doubles. Tests make it small, never the schedule's shape."""
    retries: int = 3
    """Tries after the first one."""
    jitter: float = 0.25
    """Each wait is scaled by a factor drawn in [1 - jitter, 1 + jitter)."""
    max_wait_s: float = 30.0
    """The longest wait a `Retry-After` may ask for before the call gives up."""

    def wait_s(self, retry: int, draw: float, asked_s: float | None = None) -> float | None:
        """Seconds to wait before retry number `retry` (1-based), or None to give up.

        `draw` is uniform in [0, 1) (the caller's random source, so tests can fix it);
        `asked_s` is the server's `Retry-After`, when it sent one.
        """
        if retry > self.retries:
            return None
        nominal = self.base_s * 2.0 ** (retry - 1)
        wait = nominal * (1 + self.jitter * (2 * draw - 1))
        if asked_s is None:
            return wait
        return max(wait, asked_s) if asked_s <= self.max_wait_s else None
