"""choird's own health: its database and its disk, as the operator should hear about them.

Faults are reported where they happen — the Postgres supervisor when the postmaster dies, the
pool when a write fails for lack of space, the log handler when a line cannot be written, the
agent socket when it cannot be created — and land here as at most one `Problem` per component.
A problem is logged once when it starts (and when its state changes), once when it clears, and
each change is told to the listeners: the operator feed (`subscribe`'s `health` items, which the
console's header follows) and the session reaper, which must not count the time choird could
not record heartbeats against an agent (issue 12 points 4 and 6). `status` shows the same view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from choir.daemon.sessions.state import Clock, utc_now
from choir.logs import get_logger

log = get_logger("choird.health")

Component = Literal["postgres", "disk"]
HealthView = dict[str, Any]
"""`{"postgres": problem view or None, "disk": problem view or None}`."""
HealthListener = Callable[[HealthView], None]


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with one component, in the operator's words."""

    component: Component
    state: str
    """postgres: `down` (not serving) or `restarting`; disk: `full` or `io_error`."""
    reason: str
    """One line: what failed, and what choird does about it."""
    since: datetime
    """When the component stopped being healthy (kept across changes of reason)."""
    where: str | None = None
    """The path concerned (disk problems)."""
    restarts: int = 0
    """Restart attempts so far (postgres)."""

    def view(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "reason": self.reason,
            "since": self.since.isoformat().replace("+00:00", "Z"),
            "where": self.where,
            "restarts": self.restarts,
        }


class DaemonHealth:
    """The current problems, and who to tell when they change."""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self._clock = clock
        self._problems: dict[Component, Problem] = {}
        self._listeners: list[HealthListener] = []
        self.recovered_at: datetime | None = None
        """When the last problem cleared: heartbeats could be recorded again from then on."""

    def report(
        self,
        component: Component,
        state: str,
        reason: str,
        *,
        where: str | None = None,
        restarts: int | None = None,
    ) -> None:
        """Record that `component` is unhealthy; logs and tells listeners when it changed."""
        old = self._problems.get(component)
        since = old.since if old is not None else self._clock()
        if restarts is None:
            restarts = old.restarts if old is not None else 0
        new = Problem(component, state, reason, since, where, restarts)
        if new == old:
            return
        self._problems[component] = new
        if old is None or old.state != state or old.reason != reason:
            fields = {"state": state, "reason": reason, "where": where}
            log.warning(f"{component} unhealthy", fields=fields)
        self._tell()

    def clear(self, component: Component) -> None:
        """`component` works again; logs how long it did not, tells listeners."""
        old = self._problems.pop(component, None)
        if old is None:
            return
        now = self._clock()
        self.recovered_at = now
        down_s = round((now - old.since).total_seconds(), 3)
        log.info(f"{component} healthy again", fields={"after_s": down_s, "was": old.state})
        self._tell()

    def problem(self, component: Component) -> Problem | None:
        return self._problems.get(component)

    @property
    def healthy(self) -> bool:
        return not self._problems

    def view(self) -> HealthView:
        return {
            c: (p.view() if (p := self._problems.get(c)) else None) for c in ("postgres", "disk")
        }

    def subscribe(self, listener: HealthListener) -> Callable[[], None]:
        """Call `listener` with the whole view after every change; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _tell(self) -> None:
        view = self.view()
        for listener in list(self._listeners):
            try:
                listener(view)
            except Exception:
                log.exception("health listener failed")
