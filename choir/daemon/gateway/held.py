"""What the agents' services say before the gateways listen, kept for them.

A starting choird gives adopted agents their sockets back at step 6 (§6.2) and they replicate at
once what they did while it was away — a core job's `core_started` among it — but the console
DM listens from step 9 (with the operator API) and the Telegram bots from step 8, after it.
`GatewayNews` subscribes to the replicated events, the sessions' ends and the approvals asked
and decided before step 6 and keeps what it hears until the gateways started (`seal`): a
gateway subscribing through it first hears what was kept, in order, then the live news — so a
job started in that window gets its Telegram card, an approval asked then its Telegram message,
and a reply made then is among the console's recent replies. Sealed, it keeps nothing more and
only passes news on; closed (with choird), it unsubscribes.

Telegram replies need none of this: they go by each DM's reply cursor, read back from the
session's log when the bots start (`telegram.reply_cursor`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, ParamSpec, TypeVar

from choir.logs import get_logger

if TYPE_CHECKING:
    from choir.daemon.agents.ingest import Durable
    from choir.daemon.agents.services import AgentServices
    from choir.daemon.sessions.state import SessionEnded
    from choir.store.approvals.pending import ApprovalRow

log = get_logger("choird.gateway")

P = ParamSpec("P")
L = TypeVar("L")


class Held(Generic[P]):
    """One subscription whose news is kept, until sealed, for whoever subscribes later."""

    def __init__(self, subscribe: Callable[[Callable[P, None]], Callable[[], None]]) -> None:
        self._kept: list[Callable[[Callable[P, None]], None]] | None = []
        self._listeners: list[Callable[P, None]] = []
        self._unsubscribe = subscribe(self._heard)

    def _heard(self, *args: P.args, **kwargs: P.kwargs) -> None:
        def tell(listener: Callable[P, None]) -> None:
            listener(*args, **kwargs)

        if self._kept is not None:
            self._kept.append(tell)
        for listener in list(self._listeners):
            _tell(tell, listener)

    def subscribe(self, listener: Callable[P, None]) -> Callable[[], None]:
        """Tell `listener` what was kept, then every news; returns the unsubscribe."""
        for tell in self._kept or ():
            _tell(tell, listener)
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def seal(self) -> None:
        """Keep nothing more (what was kept is dropped): a later subscriber hears news only."""
        self._kept = None

    def close(self) -> None:
        self._unsubscribe()
        self._listeners.clear()


def _tell(tell: Callable[[L], None], listener: L) -> None:
    """One listener told; its failure is logged, never the others' problem."""
    try:
        tell(listener)
    except Exception:
        log.exception("gateway listener failed")


@dataclass(frozen=True)
class GatewayNews:
    """The agents' news the gateways hear from before adoption (until sealed after step 8)."""

    replicated: Held[[Durable]]
    """Events made durable (`EventIngest.subscribe`)."""
    ended: Held[[SessionEnded]]
    """Sessions that ended (`SessionService.subscribe`)."""
    asked: Held[[ApprovalRow]]
    """Approvals requested (`ApprovalService.subscribe_requests`)."""
    decided: Held[[ApprovalRow]]
    """Approvals resolved (`ApprovalService.subscribe`)."""

    @classmethod
    def hold(cls, services: AgentServices) -> GatewayNews:
        approvals = services.approvals
        return cls(
            Held(services.replicator.subscribe),
            Held(services.sessions.subscribe),
            Held(approvals.subscribe_requests),
            Held(approvals.subscribe),
        )

    def _all(self) -> tuple[Held[...], ...]:
        return (self.replicated, self.ended, self.asked, self.decided)

    def seal(self) -> None:
        for held in self._all():
            held.seal()

    def close(self) -> None:
        for held in self._all():
            held.close()
