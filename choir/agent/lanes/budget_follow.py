"""Budgets that follow config and status (§7.6, §16.3): a reload applies at the next check.

Two things went stale before this module: a budget lowered by `config apply` reached the agent's
config snapshot but not the arbiter, which kept the limits it was built with; and the remaining
budgets choird shows (`agent status`, the console's Lanes tab) were sent only when a lane changed
state, so a core job's calls never moved edge's figure. `BudgetFollower` swaps the arbiter's
limits whenever a new config version is swapped in — a lane already past a lowered limit is
refused at its next check and ends with the usual budget outcome — and re-sends each lane's
latest status when what it has left changed (a charge, a reload), coalesced per loop turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Final

from choir.agent.kernel.arbiter import Arbiter
from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.replication.live_config import DynamicConfig, DynamicState
from choir.logs import get_logger
from choir.protocol import job_name_of

log = get_logger("choir.agent.budgets")

CHARGING: Final = frozenset(
    {"model_output", "tool_call_committed", "core_started", "core_stopped", "injected_instruction"}
)
"""Committed kinds after which some budget was charged (or a job's counters opened or closed)."""
WALL_TIME: Final = "per_job_wall_time_ms"
"""Left of it shrinks every millisecond: a change of it alone is no reason to report."""

Remaining = Callable[[str], Mapping[str, int] | None]
"""A lane's budgets left now; None for a lane that has none any more (a finished job)."""
Refresh = Callable[[Remaining, bool], None]
"""Re-send lanes' latest status with fresh budgets; `True` sends even unchanged figures."""


class BudgetFollower:
    """Keeps the arbiter's limits at the current config's budgets and the reported figures fresh."""

    def __init__(
        self, state: DynamicState, log_: CommitLog, arbiter: Arbiter, refresh: Refresh
    ) -> None:
        self._state, self._log, self._arbiter, self._refresh = state, log_, arbiter, refresh
        self._due: asyncio.Handle | None = None
        self._unsubscribe: list[Callable[[], None]] = []

    def start(self) -> None:
        self._unsubscribe = [
            self._state.subscribe(self.config_swapped),
            self._log.subscribe(self._committed),
        ]

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._due is not None:
            self._due.cancel()
            self._due = None

    def config_swapped(self, config: DynamicConfig) -> None:
        """A new config version: its budgets rule every check from now on."""
        try:
            limits = config.budget_limits()
        except (TypeError, ValueError) as error:  # keep enforcing the last valid budgets
            log.warning(
                "budgets not reloaded: invalid in the new config", fields={"error": str(error)}
            )
            return
        if limits == self._arbiter.policy.limits:
            return
        self._arbiter.policy.set_limits(limits)
        log.info("budgets reloaded", fields={"config_version": config.version})
        self._refresh(self.remaining, True)

    def remaining(self, lane: str) -> Mapping[str, int] | None:
        job = job_name_of(lane)
        if job is not None and job not in self._arbiter.policy.budgets.jobs:
            return None
        return self._arbiter.policy.remaining(lane)

    def _committed(self, entry: LogEntry) -> None:
        # charges land just after the commit (tokens in `Arbiter.commit`): look a turn later,
        # once per burst of commits
        if entry.kind in CHARGING and self._due is None:
            self._due = asyncio.get_running_loop().call_soon(self._charged)

    def _charged(self) -> None:
        self._due = None
        self._refresh(self.remaining, False)


def changed(before: Mapping[str, int], after: Mapping[str, int]) -> bool:
    """Whether a lane's budgets left moved, beyond the wall time that always does."""
    return {k: v for k, v in before.items() if k != WALL_TIME} != {
        k: v for k, v in after.items() if k != WALL_TIME
    }


__all__ = ["BudgetFollower", "Refresh", "Remaining", "changed"]
