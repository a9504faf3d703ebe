"""Resuming a crashed session (§13.2, §13.3, §7.8; DESIGN-NOTES "Durability").

The restored log holds exactly what choird acknowledged. From it:

- edge is never resumed mid-cycle: the calls of its last model output that have no result are
  answered (`interrupted`, or `outcome_unknown` when their intent was committed) so its
  transcript stays valid, and an interrupted cycle gets an `error` reply asking the user to send
  the message again. Nothing edge proposed runs again.
- a core job that was running (a `CoreStarted` without `CoreStopped`) is re-created under its
  own lane and continues at a safe point: it first re-proposes the calls of its last model
  output that have no result, with their committed call ids (a committed call returns its
  committed result; an idempotent call whose outcome is unknown simply runs again, which is
  safe by definition), then goes on with its next LLM call.
- a core job with a non-idempotent call whose outcome is unknown is *held*: it is not resumed
  until the operator decides (`choirctl session recover`, a `recover` push). Every decision
  first commits an `outcome_unknown` result for the call, so the model sees what happened; then
  `abort` stops the job with a report, `resume` re-creates it, `read_only` re-creates it limited
  to tools that change nothing. Each is told to the job through an `InjectedInstruction`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from choir.agent.arbiter import ToolProposal
from choir.agent.commitlog import CommitLog, LogEntry
from choir.agent.core_jobs import READ_ONLY, CoreJob, CoreJobs
from choir.agent.lane_support import LaneKit
from choir.core.working_memory import WorkingMemory
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    CoreJobStart,
    CoreStopped,
    InjectedInstruction,
    ToolCall,
    ToolResult,
    ToolResultCommitted,
    core_lane,
)

log = get_logger("choir.agent.recovery")

Choice = Literal["resume", "read_only", "abort"]

OUTCOME_UNKNOWN: Final = "outcome_unknown"
"""error_code of the result committed for a call whose intent survived a crash but not its
result: it may or may not have taken effect."""
INTERRUPTED: Final = "interrupted"
"""error_code of the result committed for a proposed call that never started."""


@dataclass(frozen=True, slots=True)
class OpenJob:
    """A core job the crash interrupted."""

    start: CoreJobStart
    started_rev: int
    """The rev of its `CoreStarted`: its working memory begins after it."""


def open_jobs(entries: Iterable[LogEntry]) -> dict[str, OpenJob]:
    """Jobs with a `CoreStarted` and no `CoreStopped` after it, by name."""
    jobs: dict[str, OpenJob] = {}
    for entry in entries:
        if entry.kind == "core_started":
            start = CoreJobStart.model_validate(entry.event["job"])
            jobs[start.job_name] = OpenJob(start, entry.rev)
        elif entry.kind == "core_stopped":
            jobs.pop(str(entry.event["job_name"]), None)
    return jobs


def unresolved(entries: Iterable[LogEntry]) -> list[LogEntry]:
    """Intents (`ToolCallCommitted`) with no committed result, oldest first."""
    open_intents: dict[str, LogEntry] = {}
    for entry in entries:
        if entry.kind == "tool_call_committed":
            open_intents[str(entry.event["call_id"])] = entry
        elif entry.kind == "tool_result_committed":
            open_intents.pop(str(entry.event["call_id"]), None)
    return list(open_intents.values())


def pending_calls(entries: Iterable[LogEntry], lane: str) -> list[ToolCall]:
    """The calls of `lane`'s last model output that have no committed result."""
    calls: list[ToolCall] = []
    answered: set[str] = set()
    for entry in entries:
        if entry.lane != lane:
            continue
        if entry.kind == "model_output":
            calls = [ToolCall.model_validate(call) for call in entry.event["tool_calls"]]
            answered = set()
        elif entry.kind == "tool_result_committed":
            answered.add(str(entry.event["call_id"]))
    return [call for call in calls if call.id not in answered]


def unknown_outcome(tool: str, *, idempotent: bool) -> ToolResult:
    """What the model is told about a call the crash interrupted after its intent."""
    advice = (
        "it is safe to call again"
        if idempotent
        else "check whether it took effect before doing it again"
    )
    return ToolResult.fail(
        OUTCOME_UNKNOWN,
        f"the agent crashed while {tool} ran: it may or may not have taken effect; {advice}",
    )


def settle_edge(commit_log: CommitLog) -> None:
    """Before the lanes start: answer edge's unanswered calls and its interrupted message.

    Committed straight into the restored log, before the arbiter folds its idempotency table,
    so none of these calls can be re-run by a re-proposal.
    """
    entries = list(commit_log)
    intents = {str(e.event["call_id"]): e for e in unresolved(entries) if e.lane == EDGE_LANE}
    for call in pending_calls(entries, EDGE_LANE):
        intent = intents.get(call.id)
        if intent is not None:
            result = unknown_outcome(call.name, idempotent=bool(intent.event["idempotent"]))
        else:
            result = ToolResult.fail(
                INTERRUPTED, f"{call.name} did not run: the agent restarted first"
            )
        commit_log.commit(
            EDGE_LANE, ToolResultCommitted(call_id=call.id, tool=call.name, result=result)
        )
    waiting = _unanswered_message(entries)
    if waiting is not None:
        reply = AgentReplied(
            text="I was restarted while working on your message; please send it again.",
            category="error",
            in_reply_to=waiting,
        )
        commit_log.commit(EDGE_LANE, reply)


def _unanswered_message(entries: list[LogEntry]) -> str | None:
    """The message id of edge's last user message, when no reply to it was committed."""
    waiting: str | None = None
    for entry in entries:
        if entry.kind == "user_msg":
            waiting = str(entry.event.get("message_id") or "") or None
        elif entry.kind == "agent_replied" and entry.event.get("category") in ("reply", "error"):
            waiting = None
    return waiting


class RecoverableCoreJobs(CoreJobs):
    """`CoreJobs` that can re-create the jobs a crash interrupted, and hold the unsafe ones."""

    def __init__(self, kit: LaneKit) -> None:
        super().__init__(kit)
        self.held: dict[str, tuple[OpenJob, list[LogEntry]]] = {}
        """Jobs waiting for the operator: the job, and its calls with an unknown outcome."""

    def resume_open(self) -> list[str]:
        """Re-create every interrupted job that can safely go on; returns their names."""
        log_ = self._kit.kernel.log
        entries = list(log_)
        intents = unresolved(entries)
        resumed: list[str] = []
        for name, job in open_jobs(entries).items():
            lane = core_lane(name)
            unsafe = [e for e in intents if e.lane == lane and not e.event["idempotent"]]
            if unsafe:
                self.held[name] = (job, unsafe)
                log.warning(
                    "core job held: a non-idempotent call has an unknown outcome",
                    fields={"job": name, "calls": [e.event["call_id"] for e in unsafe]},
                )
                continue
            self._recreate(job, job.start)
            resumed.append(name)
        return resumed

    def decide(self, choice: Choice, job_name: str | None) -> list[str]:
        """Apply the operator's decision to one held job (or all); the names it applied to."""
        names = [job_name] if job_name is not None else sorted(self.held)
        decided: list[str] = []
        for name in names:
            held = self.held.pop(name, None)
            if held is None:
                log.info("recover decision for a job that is not held", fields={"job": name})
                continue
            job, calls = held
            self._settle(job, calls, choice)
            decided.append(name)
        return decided

    def _settle(self, job: OpenJob, calls: list[LogEntry], choice: Choice) -> None:
        arbiter, lane = self._kit.kernel.arbiter, core_lane(job.start.job_name)
        for intent in calls:
            tool, call_id = str(intent.event["tool"]), str(intent.event["call_id"])
            result = unknown_outcome(tool, idempotent=False)
            arbiter.commit(lane, ToolResultCommitted(call_id=call_id, tool=tool, result=result))
        tools = ", ".join(str(intent.event["tool"]) for intent in calls)
        if choice == "abort":
            report = f"aborted by the operator after a crash interrupted {tools}"
            stopped = CoreStopped(
                job_name=job.start.job_name,
                job_id=job.start.job_id,
                outcome="cancelled",
                report=report,
            )
            arbiter.commit(lane, stopped)
            text = f"core job {job.start.job_name} cancelled: {report}"
            arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="core_report"))
            return
        start = job.start
        mode = "resume"
        if choice == "read_only":
            start = _read_only(start, self._kit)
            mode = "resume with tools that only read"
        note = (
            f"The agent crashed while {tools} ran; its outcome is unknown (see its result). "
            f"The operator chose to {mode}: check what happened before changing anything."
        )
        arbiter.commit(lane, InjectedInstruction(target=lane, content=note, source="user"))
        self._recreate(job, start)

    def _recreate(self, open_job: OpenJob, start: CoreJobStart) -> None:
        """The job again, under its lane, continuing from its committed window."""
        kit, name = self._kit, start.job_name
        refused = kit.kernel.arbiter.start_job(
            name, time_budget_ms=start.tool_constraints.time_budget_ms or None
        )
        if refused is not None:
            log.error("could not resume core job", fields={"job": name, "why": refused})
            return
        job = CoreJob(start, core_lane(name))
        self._jobs[name] = job
        self._move(job, "job_start")
        memory = WorkingMemory(job.lane, window_start_rev=open_job.started_rev + 1)
        kit.memories.track(memory.observe_all(kit.kernel.log))
        job.task = asyncio.get_running_loop().create_task(self._resumed(job), name=job.lane)
        log.info("core job resumed", fields={"job": name})

    async def _resumed(self, job: CoreJob) -> None:
        """Finish the interrupted turn with its committed call ids, then run on."""
        arbiter = self._kit.kernel.arbiter
        try:
            for call in pending_calls(self._kit.kernel.log, job.lane):
                await arbiter.propose(ToolProposal(job.lane, call.id, call.name, call.arguments))
        except asyncio.CancelledError:
            self._move(job, "cancel")
            self._stop(job, "cancelled", job.cancel_reason or "cancelled")
            raise
        await self._run(job)


def _read_only(start: CoreJobStart, kit: LaneKit) -> CoreJobStart:
    """`start` limited to the core tools that change nothing (within its own allowance)."""
    registry = kit.kernel.registry
    allowed = set(start.tool_constraints.allowed_tools)
    readers = [
        name
        for name in registry.names_for_lane("core:x")
        if (tool := registry.get(name)) is not None
        and tool.manifest.runtime.side_effect in READ_ONLY
        and (not allowed or name in allowed)
    ]
    constraints = start.tool_constraints.model_copy(update={"allowed_tools": readers})
    return start.model_copy(update={"tool_constraints": constraints})


__all__ = [
    "INTERRUPTED",
    "OUTCOME_UNKNOWN",
    "Choice",
    "OpenJob",
    "RecoverableCoreJobs",
    "open_jobs",
    "pending_calls",
    "settle_edge",
    "unknown_outcome",
    "unresolved",
]
