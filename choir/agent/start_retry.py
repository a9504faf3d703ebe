"""A start that rides out a choird restart: INIT_HELLO, the handover and the config wait for choird.

From its first call an agent can find choird gone (killed, restarted, upgraded): the channel
closes under a call in flight, or connecting is refused until choird is back. The restarted choird
adopts a starting agent as it adopts a serving one (`choir.daemon.runtimes.adopt`: its process is
recorded, or its container labelled, at spawn; its session and lease taken at `agent start`, not
at INIT_HELLO). So a lost connection during the start is waited out, not taken for a failed start:
the step runs again on the fresh connection `ReconnectingClient` makes at its next call, after
the replicator's backoff (`backoff.Backoff`), for at most `START_PATIENCE_S` of outage. Every
step is safe to run again. INIT_HELLO only reads on choird's side — it checks the caller, reads
the handover's first page and the day's spend, and pushes the session's pending user messages
again, which the edge lane drops by message id when it has them (`choir.daemon.agents.hello`) —
so a hello choird handled but whose answer was lost gets the same answer from the choird that
comes back: no second session or lease. The later steps only read too (FETCH_EVENTS,
FETCH_ARTIFACT, FETCH_DYNAMIC_CONFIG, GET_SECRETS). choird answering "not now" (`WAITED_OUT`) is
waited out the same way. A refusal that is not an outage — a bad token, an ended session (one
the restarted choird did not adopt), a protocol or image choird does not expect, an invalid
request, a server whose certificate is not the one the agent trusts — fails the start at once,
as before.

It loads before INIT_HELLO, so it imports nothing heavier than the transport (no pydantic, no
wire models: `tests/test_start_imports.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from choir.agent.replication.backoff import Backoff, Outage
from choir.errors import UnavailableError
from choir.logs import get_logger
from choir.protocol.wire.error_codes import ErrorCode
from choir.transport.errors import RpcError, TransportError, UntrustedServer

log = get_logger("choir.agent")

T = TypeVar("T")
ChoirErrorLike = TransportError | RpcError
"""What a control-plane call raises when choird does not do it."""

START_PATIENCE_S: Final = 60.0
"""How long a starting agent waits for an unreachable choird before it gives its start up. A
restart takes seconds; and a choird back later than the session's lease
(`crash_detection_threshold_ms`, 10 s by default) does not adopt the agent anyway — it stops it
and marks the session crashed — so the wait only needs to cover the longest lease an operator
is likely to set, while still ending an agent whose choird is not coming back. A serving agent
has no such limit: it holds committed work, and waits until choird answers or stops it."""


class ChoirdUnreachable(UnavailableError):
    """choird stayed unreachable for `START_PATIENCE_S` while the agent was starting."""


class StartPatience:
    """Runs the start's steps, each again while choird is away, within one outage budget."""

    def __init__(self, agent_id: str, *, patience_s: float = START_PATIENCE_S) -> None:
        self.agent_id = agent_id
        self.patience_s = patience_s
        """How long one outage may last before the start is given up."""
        self._outage = Outage(Backoff())

    async def run(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """`step()`'s result, retried while it fails because choird is away; `what` names the
        step in the log and the error."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                result = await step()
            except (TransportError, RpcError) as error:
                if not choird_away(error):
                    raise
                await self._wait(loop.time(), what, error)
                continue
            self._back(loop.time())
            return result

    def _back(self, now: float) -> None:
        """End the outage, if there was one, and say so."""
        ended = self._outage.ended()
        if ended is not None:
            attempts, since = ended
            waited_s = round(now - since, 1)
            log.info("choird reachable again", fields={"attempts": attempts, "waited_s": waited_s})

    async def _wait(self, now: float, what: str, error: ChoirErrorLike) -> None:
        """Record the failed attempt and sleep until the next; ChoirdUnreachable past the
        budget."""
        import random  # only once choird is away: not on the way to INIT_HELLO (~1 ms)

        if self._outage.failed(str(error), now, random.random()):
            log.warning(
                "choird unreachable while starting; retrying",
                fields={"step": what, "error": str(error), "patience_s": self.patience_s},
            )
        given_up_at = self._outage.since + self.patience_s
        if now >= given_up_at:
            raise ChoirdUnreachable(
                f"choird was unreachable for {self.patience_s:g} s while {self.agent_id} was "
                f"starting ({what}: {error}); start choird, then the agent again (choirctl "
                f"agent status {self.agent_id} gives the command)"
            )
        await asyncio.sleep(max(0.0, min(self._outage.retry_at, given_up_at) - now))


WAITED_OUT: Final = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.RATE_LIMITED})
"""choird's answers that say "not now": it is restarting or its database is away, or this
session is over its request rate (a resumed session's handover fetches page after page). The
replicator retries `internal` too, since it holds committed work; a start gives up on it at
once: a fault in choird does not go away within the patience, and the operator should hear of it."""


def choird_away(error: ChoirErrorLike) -> bool:
    """Whether `error` means choird cannot serve the call now (lost, refused, restarting, or
    asking the agent to slow down), not a refusal: the channel failed, or its answer's code is
    one of `WAITED_OUT`."""
    if isinstance(error, TransportError):
        return not isinstance(error, UntrustedServer)  # no wait mends an untrusted certificate
    return error.code in WAITED_OUT


__all__ = ["START_PATIENCE_S", "WAITED_OUT", "ChoirdUnreachable", "StartPatience", "choird_away"]
