"""The intent contract the kernel owns (§13, DESIGN-NOTES "Durability").

Before a non-idempotent tool runs, the arbiter hands its committed intent to an `IntentSink`,
which returns once the intent is durable elsewhere (replication: acknowledged by choird) — or
raises `IntentNotDurable`, and the tool does not run. The kernel defines both; replication
implements the sink, so the kernel never imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from choir.agent.kernel.commitlog import LogEntry
from choir.errors import ChoirError

IntentSink = Callable[[LogEntry], Awaitable[None]]
"""Makes a non-idempotent intent durable at choird before its tool runs."""


class IntentNotDurable(ChoirError):
    """A non-idempotent intent was not acknowledged in time: its tool must not run."""


__all__ = ["IntentNotDurable", "IntentSink"]
