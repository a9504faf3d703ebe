"""The session a start rebuilt from choird's handover, and the source of its snapshots (§13).

INIT_HELLO answers a resume with the newest snapshot and the acknowledged events after it (or
every event, when there is no usable snapshot). `RestoredSession` turns that into the runtime's
state, in two steps:

- at once: the commit log, continuing the chain at the snapshot's (rev, hash) and verified, and
  the `Ledger` (open intents and calls, approvals, open jobs, budgets) folded from the snapshot
  and the tail. Recovery settles edge from it before the kernel starts. The ledger reads the
  whole of the previews it acts on (`snapshot_fetch.CONTENT_KINDS`), never their previews.
- `attach`, once the kernel and lanes exist and before any runs: the arbiter's budgets and skill
  runs, and every open lane's working memory, each the snapshot's value with the tail folded in.

From `attach` on, `take` is the replicator's snapshot provider: the §13.4 state at the log head.
A snapshot whose content does not match its digest is refused before anything is restored —
choird checks the same before it hands one over, so this only trips on a choird bug.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.recovery.capture import (
    Head,
    JobView,
    capture,
    head_of,
    restore_memories,
    restore_skill_runs,
)
from choir.agent.recovery.fetch import CONTENT_KINDS
from choir.agent.recovery.ledger import Ledger
from choir.agent.startup import restored_log
from choir.core import budgets
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import EDGE_LANE, InitHelloResponse, LaneStatus, core_lane, job_name_of
from choir.protocol.log.snapshot import LaneState, Snapshot
from choir.protocol.tooling.locks import HeldLock

if TYPE_CHECKING:
    from choir.agent.lanes.edge import EdgeLane
    from choir.agent.lanes.support import LaneKit
    from choir.agent.recovery.resume import CoreJobRecovery

log = get_logger("choir.agent.recovery.resume")


class SnapshotRefused(ChoirError):
    """choird handed over a snapshot that cannot be trusted."""


class RestoredSession:
    """One session's restored log and recovery facts; `take` snapshots it once attached."""

    def __init__(
        self, answer: InitHelloResponse, artifacts: Mapping[str, bytes] | None = None
    ) -> None:
        snapshot = answer.snapshot
        if snapshot is not None and (problem := snapshot.content_problem()) is not None:
            raise SnapshotRefused(
                f"choird handed over the snapshot at rev {snapshot.rev}, but {problem} here "
                "(choird checked it, so choird and this agent disagree on the snapshot format): "
                "nothing was restored; rebuild the agent with choirctl agent update"
            )
        self.snapshot = snapshot
        self.spend = answer.spend
        """The agent's spend choird counted before this session (re)started."""
        self.log: CommitLog = restored_log(answer)
        self.log.artifacts.update(artifacts or {})
        self.ledger = Ledger.of(snapshot).observe_all(map(self._whole, self.log))
        """Kept current by every commit from here on (for the life of the log)."""
        self.log.subscribe(lambda entry: self.ledger.observe(self._whole(entry)))
        self._kit: LaneKit | None = None
        self._edge: EdgeLane | None = None
        self._jobs: CoreJobRecovery | None = None
        if answer.status == "resumed":
            log.info(
                "session restored",
                fields={
                    "snapshot_rev": snapshot.rev if snapshot is not None else None,
                    "tail_events": len(self.log),
                    "head_rev": self.log.head_rev,
                },
            )

    def _whole(self, entry: LogEntry) -> LogEntry:
        """`entry` as the ledger must read it: whole where it acts on a preview's content."""
        return self.log.resolved(entry) if entry.kind in CONTENT_KINDS else entry

    def attach(self, kit: LaneKit, edge: EdgeLane, jobs: CoreJobRecovery) -> None:
        """Give the kernel and the lanes (built, not yet running) their restored state: the
        budgets, skill runs and open approvals, and every open lane's working memory."""
        arbiter, entries = kit.kernel.arbiter, list(self.log)
        policy = arbiter.policy
        policy.budgets = self.ledger.counters(time.monotonic())
        _, policy.tokens_exceeded = budgets.charge_tokens(policy.budgets, 0, policy.limits)
        restored_runs = restore_skill_runs(self.snapshot, entries, kit.kernel.skills)
        policy.skill_runs.update(restored_runs)
        arbiter.expect_approvals(self.ledger.approvals)
        memories = restore_memories(self.snapshot, entries)
        open_lanes = {EDGE_LANE, *(core_lane(name) for name in self.ledger.jobs)}
        for lane, memory in memories.items():
            if lane in open_lanes:
                kit.memories.track(memory)
        self._kit, self._edge, self._jobs = kit, edge, jobs

    def take(self) -> Snapshot | None:
        """The session's §13.4 state at the log head; None until `attach`."""
        kit, edge, jobs = self._kit, self._edge, self._jobs
        if kit is None or edge is None or jobs is None:
            return None
        kernel = kit.kernel
        views = jobs.views()
        return capture(
            self._head(),
            self.ledger,
            dict(kit.memories.lanes),
            kernel.arbiter.policy.skill_runs,
            kernel.skills,
            self._lanes(kit, edge.state, views),
            views,
            _locks(kit),
        )

    def _head(self) -> Head:
        commit_log = self.log
        if len(commit_log):
            return head_of(commit_log.entry(commit_log.head_rev))
        ts = self.snapshot.ts if self.snapshot is not None else None
        return Head(commit_log.head_rev, commit_log.head_hash, ts)

    def _lanes(
        self, kit: LaneKit, edge_state: LaneStatus, views: Mapping[str, JobView]
    ) -> dict[str, LaneState]:
        """Each lane's state, and what it has left of its budgets (§13.4 `lane_state`)."""
        statuses = {EDGE_LANE: edge_state} | {core_lane(n): v.status for n, v in views.items()}
        arbiter, now = kit.kernel.arbiter, time.monotonic()
        states: dict[str, LaneState] = {}
        for lane, status in statuses.items():
            job = job_name_of(lane)
            counted = job is None or job in arbiter.policy.budgets.jobs
            left = (
                budgets.remaining(arbiter.policy.budgets, arbiter.policy.limits, lane, now)
                if counted
                else {}
            )
            states[lane] = LaneState(status=status, budgets_remaining=left)
        return states


def _locks(kit: LaneKit) -> dict[str, list[HeldLock]]:
    """Who holds what, by lane."""
    held: dict[str, list[HeldLock]] = {}
    for info in kit.kernel.locks.snapshot():
        if info.mode == "FREE":
            continue
        for owner in info.holders:
            held.setdefault(owner, []).append(HeldLock(resource=info.resource, mode=info.mode))
    return held


__all__ = ["RestoredSession", "SnapshotRefused"]
