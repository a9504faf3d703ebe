"""A live session's state captured as a `Snapshot`, and the state a snapshot plus a tail restore
(§13.4).

Pure conversions. Working memory and skill runs are folds over the log, so restoring is: start
from the snapshot's values (or empty ones at rev 0) and fold every entry after it, exactly as the
live lanes do — a job's memory is opened by its `CoreStarted` and dropped after its
`CoreStopped`. What is in flight (a compaction call, a manual trigger) is not state: a restart
abandons it, as a crash would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from choir.agent.kernel.commitlog import LogEntry
from choir.agent.recovery.ledger import Ledger
from choir.core.memory.working import WindowEvent, WorkingMemory
from choir.core.skills import runner as skill_runner
from choir.core.skills.runner import SkillRun
from choir.protocol import EDGE_LANE, LaneStatus, SkillSpec, core_lane
from choir.protocol.log.snapshot import LaneState, OpenJob, Snapshot, WindowRecord
from choir.protocol.tooling.locks import HeldLock
from choir.protocol.tooling.memory import ReferenceSummary

_SKILL_KINDS: Final = frozenset(
    {"skill_transition_committed", "model_output", "tool_result_committed"}
)
"""Kinds that can move a skill run (`skill_runner.apply`); only these are parsed on replay."""


@dataclass(frozen=True, slots=True)
class Head:
    """Where the log stands: the snapshot is taken at its head."""

    rev: int
    hash: str
    ts: datetime | None


@dataclass(frozen=True, slots=True)
class JobView:
    """A core job as its lane sees it."""

    status: LaneStatus


def capture(
    head: Head,
    ledger: Ledger,
    memories: Mapping[str, WorkingMemory],
    runs: Mapping[str, SkillRun | None],
    skills: Mapping[str, SkillSpec],
    lanes: Mapping[str, LaneState],
    jobs: Mapping[str, JobView],
    locks: Mapping[str, list[HeldLock]],
) -> Snapshot:
    """The session at `head`, sealed with its digest."""
    progress = {
        lane: step
        for lane, run in runs.items()
        if (step := skill_runner.to_progress(run, skills)) is not None
    }
    edge = memories.get(EDGE_LANE)
    latest = edge.latest_user if edge is not None else None
    snapshot = Snapshot(
        rev=head.rev,
        hash=head.hash,
        ts=head.ts,
        reference_summaries={lane: memory.summary for lane, memory in memories.items()},
        event_window_boundary={lane: m.window_start_rev for lane, m in memories.items()},
        skill_state=progress,
        lane_state=dict(lanes),
        open_jobs=[_open_job(name, ledger, jobs.get(name)) for name in ledger.jobs],
        windows={lane: [_record(item) for item in m.events] for lane, m in memories.items()},
        latest_user=_record(latest) if latest is not None else None,
        budgets=ledger.usage(),
        open_intents=ledger.open_intents(),
        unanswered_calls={
            lane: ledger.unanswered_calls(lane)
            for lane, calls in ledger.unanswered.items()
            if calls
        },
        open_approvals=dict(ledger.approvals),
        awaiting_reply=ledger.awaiting_reply,
        locks_held={lane: list(held) for lane, held in locks.items() if held},
    )
    return snapshot.sealed()


def head_of(entry: LogEntry) -> Head:
    """The head of a log whose last entry is `entry`."""
    return Head(entry.rev, entry.hash, _ts(entry.ts))


def _open_job(name: str, ledger: Ledger, view: JobView | None) -> OpenJob:
    job = ledger.jobs[name]
    lane = core_lane(name)
    in_flight = next((i.call_id for i in ledger.intents_of(lane)), None)
    return OpenJob.model_validate(
        {
            "job_name": name,
            "job_id": job.start["job_id"],
            "status": view.status if view is not None else "CORE_WAITING_TOOL",
            "steps_taken": job.steps,
            "tool_in_flight": in_flight,
            "start": job.start,
            "started_rev": job.started_rev,
        }
    )


def _record(item: WindowEvent) -> WindowRecord:
    return WindowRecord(rev=item.rev, lane=item.lane, hash=item.hash, event=item.event)


def _event(record: WindowRecord) -> WindowEvent:
    return WindowEvent(record.rev, record.lane, record.hash, record.event)


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- restoring ------------------------------------------------------------------------------------


def snapshot_memories(snapshot: Snapshot) -> dict[str, WorkingMemory]:
    """Each lane's working memory as the snapshot recorded it."""
    memories: dict[str, WorkingMemory] = {}
    for lane, boundary in snapshot.event_window_boundary.items():
        events = tuple(_event(record) for record in snapshot.windows.get(lane, []))
        latest = None
        if lane == EDGE_LANE and snapshot.latest_user is not None:
            wanted = snapshot.latest_user.rev
            # the same object as in `events`: WorkingMemory tells it apart by identity
            latest = next((e for e in events if e.rev == wanted), _event(snapshot.latest_user))
        memories[lane] = WorkingMemory(
            lane,
            summary=snapshot.reference_summaries.get(lane) or ReferenceSummary(),
            window_start_rev=boundary,
            events=events,
            latest_user=latest,
        )
    return memories


def restore_memories(
    snapshot: Snapshot | None, entries: Iterable[LogEntry]
) -> dict[str, WorkingMemory]:
    """Every open lane's working memory after `entries` (the log after the snapshot)."""
    lanes = snapshot_memories(snapshot) if snapshot is not None else {}
    lanes.setdefault(EDGE_LANE, WorkingMemory(EDGE_LANE))
    return fold_memories(lanes, entries)


def fold_memories(
    lanes: dict[str, WorkingMemory], entries: Iterable[LogEntry]
) -> dict[str, WorkingMemory]:
    """`lanes` after `entries`, opening and closing job lanes as the live lanes do."""
    for entry in entries:
        for lane, memory in lanes.items():
            lanes[lane] = memory.observe(entry)
        kind = entry.kind
        if kind == "core_started":
            lane = core_lane(str(entry.event["job"]["job_name"]))
            lanes[lane] = WorkingMemory(lane, window_start_rev=entry.rev + 1)
        elif kind == "core_stopped":
            lanes.pop(core_lane(str(entry.event["job_name"])), None)
    return lanes


def restore_skill_runs(
    snapshot: Snapshot | None, entries: Iterable[LogEntry], skills: Mapping[str, SkillSpec]
) -> dict[str, SkillRun | None]:
    """Each lane's skill run after `entries`; events are parsed only where they can move one."""
    runs: dict[str, SkillRun | None] = {}
    if snapshot is not None:
        runs = {
            lane: skill_runner.from_progress(progress, skills)
            for lane, progress in snapshot.skill_state.items()
        }
    if not skills:
        return runs
    for entry in entries:
        kind = entry.kind
        if kind not in _SKILL_KINDS:
            continue
        run = runs.get(entry.lane)
        if kind != "skill_transition_committed" and not skill_runner.is_active(run):
            continue
        runs[entry.lane] = skill_runner.apply(run, entry.model(), skills)
    return runs


__all__ = [
    "Head",
    "JobView",
    "capture",
    "fold_memories",
    "head_of",
    "restore_memories",
    "restore_skill_runs",
    "snapshot_memories",
]
