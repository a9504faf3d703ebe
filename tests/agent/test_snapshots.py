"""Snapshots as pure round trips (§13.4): snapshot at any rev + the tail ≡ replaying everything.

One realistic session log — edge spawning a core job that runs a skill, intents with and
without results, an injection, approvals, a compaction, a job that opens and closes — is cut at
every revision. The snapshot taken there goes through JSON (as choird stores it) and, with the
events after the cut, must restore exactly the ledger, working memories, skill runs and budgets
that folding the whole log gives.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.recovery.capture import (
    Head,
    JobView,
    capture,
    head_of,
    restore_memories,
    restore_skill_runs,
)
from choir.agent.recovery.ledger import Ledger
from choir.agent.recovery.session import RestoredSession, SnapshotRefused
from choir.agent.replication.snapshots import SnapshotSchedule
from choir.core.skills.runner import SkillRun, is_active
from choir.protocol import (
    EDGE_LANE,
    GENESIS_HASH,
    AgentReplied,
    ApprovalResolved,
    CommittedEvent,
    CoreJobStart,
    CoreStarted,
    CoreStopped,
    Event,
    InitHelloResponse,
    InjectedInstruction,
    MemoryWriteCommitted,
    ModelOutput,
    ResourceBindings,
    SkillSpec,
    SkillTransitionCommitted,
    ToolCall,
    ToolCallCommitted,
    ToolCallRequested,
    ToolResult,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.log.events import Usage
from choir.protocol.log.snapshot import LaneState, Snapshot
from choir.protocol.tooling.locks import HeldLock
from choir.protocol.tooling.memory import Fact, MemoryDelta

AUTH = "core:auth"

SKILLS = {
    "build": SkillSpec.model_validate(
        {
            "name": "build",
            "description": "Implement a feature.",
            "initial_state": "understand",
            "states": {
                "understand": {
                    "objective": "Clarify.",
                    "allowed_tools": ["choir.fs.read", "choir.fs.write"],
                    "transitions": [{"on": "complete", "to": "done"}],
                },
                "done": {"terminal": True},
            },
            "max_steps": 10,
        }
    )
}


def _output(lane: str, tokens: int, *calls: ToolCall, text: str = "") -> ModelOutput:
    return ModelOutput(
        lane=lane, text=text, tool_calls=list(calls), usage=Usage(total_tokens=tokens), model="m"
    )


def _call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _intent(call_id: str, tool: str, *, idempotent: bool) -> ToolCallCommitted:
    effect = "read" if idempotent else "write"
    return ToolCallCommitted(call_id=call_id, tool=tool, side_effect=effect, idempotent=idempotent)


def _result(call_id: str, tool: str, **data: Any) -> ToolResultCommitted:
    return ToolResultCommitted(call_id=call_id, tool=tool, result=ToolResult.ok("done", **data))


def _job(name: str) -> CoreJobStart:
    return CoreJobStart(job_id=f"id-{name}", job_name=name, task_spec=f"Do {name}.")


SESSION: list[tuple[str, Event]] = [
    (EDGE_LANE, UserMsg(text="refactor auth", message_id="m1")),
    (EDGE_LANE, _output(EDGE_LANE, 100, _call("e-2-0", "choir.core.spawn", job_name="auth"))),
    (EDGE_LANE, ToolCallRequested(call_id="e-2-0", tool="choir.core.spawn")),
    (EDGE_LANE, _intent("e-2-0", "choir.core.spawn", idempotent=False)),
    (AUTH, CoreStarted(job=_job("auth"))),
    (EDGE_LANE, _result("e-2-0", "choir.core.spawn", job_name="auth")),
    (EDGE_LANE, _output(EDGE_LANE, 50, text="Started.")),
    (EDGE_LANE, AgentReplied(text="Started.", in_reply_to="m1")),
    (AUTH, SkillTransitionCommitted(skill="build", from_=None, to="understand", on="start")),
    (
        AUTH,
        _output(
            AUTH,
            200,
            _call("a-10-0", "choir.fs.write", path="a.py"),
            _call("a-10-1", "choir.fs.read", path="b.py"),
        ),
    ),
    (AUTH, _intent("a-10-0", "choir.fs.write", idempotent=False)),
    (AUTH, _result("a-10-0", "choir.fs.write")),
    (EDGE_LANE, UserMsg(text="also tests", message_id="m2")),
    (AUTH, InjectedInstruction(target=AUTH, content="also tests", source="edge")),
    (AUTH, _intent("a-10-1", "choir.fs.read", idempotent=True)),
    (EDGE_LANE, _output(EDGE_LANE, 30, _call("e-16-0", "choir.propose.config", key="x"))),
    (EDGE_LANE, _intent("e-16-0", "choir.propose.config", idempotent=False)),
    (EDGE_LANE, _result("e-16-0", "choir.propose.config", approval_id="ap-1")),
    (EDGE_LANE, _output(EDGE_LANE, 30, _call("e-19-0", "choir.propose.config", key="y"))),
    (EDGE_LANE, _result("e-19-0", "choir.propose.config", approval_id="ap-2")),
    (EDGE_LANE, ApprovalResolved(approval_id="ap-2", status="approved")),
    (
        EDGE_LANE,
        MemoryWriteCommitted(
            summary_lane=EDGE_LANE,
            delta=MemoryDelta(
                mode="append",
                summary_update="The user wants auth refactored.",
                add_fact=Fact(key="task", value="auth", source_event="0" * 64),
            ),
            window_start_rev=8,
        ),
    ),
    ("core:lint", CoreStarted(job=_job("lint"))),
    ("core:lint", _output("core:lint", 10, text="clean")),
    (
        "core:lint",
        CoreStopped(job_name="lint", job_id="id-lint", outcome="completed", report="clean"),
    ),
    (EDGE_LANE, _output(EDGE_LANE, 20, _call("e-26-0", "choir.fs.list", path="."))),
]


def session_log() -> list[LogEntry]:
    log = CommitLog()
    for lane, event in SESSION:
        log.commit(lane, event)
    return list(log)


ENTRIES = session_log()


def snapshot_at(cut: int) -> Snapshot:
    """The snapshot a live session would take after `ENTRIES[:cut]`, stored and read back."""
    before = ENTRIES[:cut]
    head = head_of(before[-1]) if before else Head(0, GENESIS_HASH, None)
    ledger = Ledger().observe_all(before)
    views = {name: JobView("CORE_REASONING") for name in ledger.jobs}
    taken = capture(
        head,
        ledger,
        restore_memories(None, before),
        restore_skill_runs(None, before, SKILLS),
        SKILLS,
        {EDGE_LANE: LaneState(status="EDGE_IDLE")},
        views,
        {AUTH: [HeldLock(resource="file:a.py", mode="X")]},
    )
    stored = json.loads(json.dumps(taken.model_dump(mode="json")))
    return Snapshot.model_validate(stored)


def active(runs: dict[str, SkillRun | None]) -> dict[str, SkillRun]:
    return {lane: run for lane, run in runs.items() if is_active(run)}


@pytest.mark.parametrize("cut", range(len(ENTRIES) + 1))
def test_a_snapshot_plus_its_tail_restores_what_replaying_everything_does(cut: int) -> None:
    snapshot, tail = snapshot_at(cut), ENTRIES[cut:]

    assert snapshot.content_problem() is None
    assert Ledger.of(snapshot).observe_all(tail) == Ledger().observe_all(ENTRIES)
    memories, replayed = restore_memories(snapshot, tail), restore_memories(None, ENTRIES)
    assert memories == replayed
    assert memories[EDGE_LANE].compactable() == replayed[EDGE_LANE].compactable()
    assert active(restore_skill_runs(snapshot, tail, SKILLS)) == active(
        restore_skill_runs(None, ENTRIES, SKILLS)
    )


def test_the_ledger_holds_what_recovery_needs_from_older_events() -> None:
    ledger = Ledger.of(snapshot_at(len(ENTRIES)))

    assert [(i.call_id, i.lane, i.idempotent) for i in ledger.intents.values()] == [
        ("a-10-1", AUTH, True)
    ]
    assert [call.id for call in ledger.unanswered_calls(AUTH)] == ["a-10-1"]
    assert [call.id for call in ledger.unanswered_calls(EDGE_LANE)] == ["e-26-0"]
    assert ledger.approvals == {"ap-1": EDGE_LANE}
    assert ledger.awaiting_reply == "m2"
    assert list(ledger.jobs) == ["auth"]
    usage = ledger.usage()
    assert (usage.core_jobs, usage.tool_calls, usage.tokens) == (2, 4, 440)
    assert (usage.jobs["auth"].steps, usage.jobs["auth"].tool_calls) == (1, 2)
    assert usage.jobs["auth"].injections == 1


def test_budgets_restore_with_the_wall_time_jobs_had_run_in_commit_time() -> None:
    ledger = Ledger.of(snapshot_at(len(ENTRIES)))
    started = datetime.fromisoformat(ENTRIES[4].ts)
    ran = (datetime.fromisoformat(ENTRIES[-1].ts) - started).total_seconds()

    counters = ledger.counters(now=1000.0)

    assert counters.jobs["auth"].started_at == pytest.approx(1000.0 - ran)
    assert (counters.core_jobs, counters.tool_calls, counters.tokens) == (2, 4, 440)


def test_the_snapshot_carries_the_spec_fields_and_the_working_memory() -> None:
    snapshot = snapshot_at(len(ENTRIES))

    assert snapshot.rev == len(ENTRIES)
    assert snapshot.hash == ENTRIES[-1].hash
    assert snapshot.event_window_boundary == {EDGE_LANE: 8, AUTH: 6}
    assert snapshot.reference_summaries[EDGE_LANE].summary == "The user wants auth refactored."
    assert snapshot.skill_state[AUTH].state == "understand"
    assert snapshot.skill_state[AUTH].steps_taken == 1
    [job] = snapshot.open_jobs
    assert (job.job_name, job.started_rev, job.tool_in_flight) == ("auth", 5, "a-10-1")
    assert job.start == _job("auth")
    assert snapshot.latest_user is not None
    assert snapshot.latest_user.rev == 13
    assert [r.rev for r in snapshot.windows[AUTH]] == [10, 12, 14]
    assert snapshot.locks_held == {AUTH: [HeldLock(resource="file:a.py", mode="X")]}


def test_a_snapshot_altered_at_rest_is_recognised() -> None:
    snapshot = snapshot_at(len(ENTRIES))
    stored = snapshot.model_dump(mode="json")
    stored["budgets"]["tokens"] = 1

    altered = Snapshot.model_validate(stored)

    assert altered.content_problem() == "its content does not match its digest"
    unsealed = snapshot.model_copy(update={"digest": None})
    assert unsealed.content_problem() == "it carries no digest"


def _resumed(snapshot: Snapshot | None, tail: list[LogEntry]) -> InitHelloResponse:
    return InitHelloResponse(
        status="resumed",
        lease_token="t",
        resource_bindings=ResourceBindings(workspace="ws", llm="demo", dm="console"),
        snapshot=snapshot,
        tail_events=[CommittedEvent.model_validate(entry.wire()) for entry in tail],
        config_version=1,
    )


def test_a_restored_session_continues_the_chain_at_the_snapshot() -> None:
    cut = 12
    restored = RestoredSession(_resumed(snapshot_at(cut), ENTRIES[cut:]))

    assert restored.log.base_rev == cut
    assert [e.rev for e in restored.log] == [e.rev for e in ENTRIES[cut:]]
    assert restored.log.head_hash == ENTRIES[-1].hash
    assert restored.ledger == Ledger().observe_all(ENTRIES)
    restored.log.commit(EDGE_LANE, AgentReplied(text="again", category="error", in_reply_to="m2"))
    assert restored.ledger.awaiting_reply is None  # the ledger follows new commits
    assert restored.take() is None  # no snapshot before the lanes are attached


def test_a_snapshot_whose_digest_does_not_match_is_refused() -> None:
    cut = 12
    snapshot = snapshot_at(cut)
    stored = snapshot.model_dump(mode="json")
    stored["awaiting_reply"] = "forged"

    with pytest.raises(SnapshotRefused, match="does not match its digest"):
        RestoredSession(_resumed(Snapshot.model_validate(stored), ENTRIES[cut:]))


class _Provider:
    def __init__(self) -> None:
        self.calls = 0
        self.head = (0, GENESIS_HASH)
        self.ready = True

    def __call__(self) -> Snapshot | None:
        self.calls += 1
        return Snapshot(rev=self.head[0], hash=self.head[1]) if self.ready else None


def test_the_schedule_counts_events_from_the_snapshot_the_session_resumed_from() -> None:
    provider = _Provider()
    schedule = SnapshotSchedule(provider, lambda: (10, 300.0), rev=95)
    schedule.started(0.0)

    provider.head = (104, "a" * 64)
    assert schedule.take(104, "a" * 64, 1.0) is None
    assert provider.calls == 0
    provider.head = (105, "b" * 64)
    taken = schedule.take(105, "b" * 64, 2.0)
    assert taken is not None
    assert taken.rev == 105

    schedule.stored(105, 2.0)
    provider.head = (106, "c" * 64)
    assert schedule.take(106, "c" * 64, 3.0) is None
    assert schedule.take(106, "c" * 64, 302.0) is not None  # the time-based cadence


def test_the_schedule_skips_a_provider_that_is_not_ready_or_off_the_head() -> None:
    provider = _Provider()
    schedule = SnapshotSchedule(provider, lambda: (1, 300.0), rev=0)
    schedule.started(0.0)
    provider.ready = False
    assert schedule.take(3, "a" * 64, 1.0) is None
    provider.ready = True
    provider.head = (2, "a" * 64)
    assert schedule.take(3, "a" * 64, 1.0) is None  # not at the log head
    provider.head = (3, "a" * 64)
    assert schedule.take(3, "a" * 64, 1.0) is not None
    schedule.skipped(3, 1.0)  # too large to send: a full period again
    provider.head = (3, "a" * 64)
    assert schedule.take(3, "a" * 64, 2.0) is None


def test_head_of_a_log_entry() -> None:
    entry = ENTRIES[-1]
    head = head_of(entry)
    assert (head.rev, head.hash) == (entry.rev, entry.hash)
    assert head.ts == datetime.fromisoformat(entry.ts)
    assert head.ts is not None
    assert head.ts.tzinfo == UTC
