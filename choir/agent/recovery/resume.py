"""Resuming a crashed session (§13.2, §13.3, §7.8; DESIGN-NOTES "Durability").

The restored log holds exactly what choird acknowledged after its snapshot (every event, when
there is none); the facts older events establish — open jobs and intents, unanswered calls and
messages — come from the session's `Ledger`, which the snapshot carries. From them:

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
  A held job is never silent: it is reported to choird as held (status, `agent status`,
  `session cores`, the console) and the user's DM is told how it goes on (`announce_held`).
"""

from __future__ import annotations

import asyncio
from typing import Final, Literal

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.lanes.core.jobs import READ_ONLY
from choir.agent.lanes.core.runner import CoreJob, CoreJobRunner
from choir.agent.lanes.support import LaneKit
from choir.agent.recovery.capture import JobView
from choir.agent.recovery.ledger import Intent, Ledger, OpenJobEntry
from choir.core.held_jobs import held_notice
from choir.core.memory.working import WorkingMemory
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    CoreJobStart,
    CoreStopped,
    InjectedInstruction,
    ReportStatusRequest,
    ToolResult,
    ToolResultCommitted,
    core_lane,
)
from choir.protocol.wire.payloads import HeldCall

log = get_logger("choir.agent.recovery.resume")

Choice = Literal["resume", "read_only", "abort"]

OUTCOME_UNKNOWN: Final = "outcome_unknown"
"""error_code of the result committed for a call whose intent survived a crash but not its
result: it may or may not have taken effect."""
INTERRUPTED: Final = "interrupted"
"""error_code of the result committed for a proposed call that never started."""
HELD_STATUS: Final = "CORE_WAITING_TOOL"
"""How a held job shows in snapshots: waiting on a call whose outcome is unknown."""


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


def settle_edge(commit_log: CommitLog, ledger: Ledger) -> None:
    """Before the lanes start: answer edge's unanswered calls and its interrupted message.

    Committed straight into the restored log, before the arbiter folds its idempotency table,
    so none of these calls can be re-run by a re-proposal. `ledger` follows the log, so what it
    says here covers the events before a snapshot too.
    """
    intents = ledger.edge_intents()
    for call in ledger.unanswered_calls(EDGE_LANE):
        intent = intents.get(call.id)
        if intent is not None:
            result = unknown_outcome(call.name, idempotent=intent.idempotent)
        else:
            result = ToolResult.fail(
                INTERRUPTED, f"{call.name} did not run: the agent restarted first"
            )
        commit_log.commit(
            EDGE_LANE, ToolResultCommitted(call_id=call.id, tool=call.name, result=result)
        )
    waiting = ledger.awaiting_reply
    if waiting is not None:
        reply = AgentReplied(
            text="I was restarted while working on your message; please send it again.",
            category="error",
            in_reply_to=waiting,
        )
        commit_log.commit(EDGE_LANE, reply)


class CoreJobRecovery:
    """Re-creates on the session's `CoreJobRunner` the jobs a crash interrupted, and holds the
    unsafe ones until the operator decides."""

    def __init__(self, kit: LaneKit, runner: CoreJobRunner, ledger: Ledger) -> None:
        self._kit = kit
        self._runner = runner
        self._ledger = ledger
        self.held: dict[str, tuple[OpenJobEntry, list[Intent]]] = {}
        """Jobs waiting for the operator: the job, and its calls with an unknown outcome."""

    def views(self) -> dict[str, JobView]:
        """Every open job's state, the held ones included (snapshots)."""
        views = {name: JobView(job.state) for name, job in self._runner.jobs.items()}
        return views | {name: JobView(HELD_STATUS) for name in self.held}

    def resume_open(self) -> list[str]:
        """Re-create every interrupted job that can safely go on; returns their names."""
        resumed: list[str] = []
        for name, job in list(self._ledger.jobs.items()):
            if name in self._runner.jobs:
                continue
            intents = self._ledger.intents_of(core_lane(name))
            unsafe = [intent for intent in intents if not intent.idempotent]
            if unsafe:
                self.held[name] = (job, unsafe)
                self._report_held(name, unsafe)
                log.warning(
                    "core job held: a non-idempotent call has an unknown outcome",
                    fields={"job": name, "calls": [intent.call_id for intent in unsafe]},
                )
                continue
            self._recreate(job, job.briefing)
            resumed.append(name)
        return resumed

    def announce_held(self, session_id: str) -> None:
        """Tell the user, in the DM, of each held job and what the operator runs to decide."""
        for name, (_, calls) in sorted(self.held.items()):
            text = held_notice(session_id, name, [intent.tool for intent in calls])
            self._kit.kernel.arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="notice"))

    def _report_held(self, name: str, calls: list[Intent]) -> None:
        lane = core_lane(name)
        report = ReportStatusRequest(
            lane=lane,
            state=HELD_STATUS,
            budget_remaining=dict(self._kit.budgets.remaining(lane) or {}),
            held=[HeldCall(call_id=intent.call_id, tool=intent.tool) for intent in calls],
        )
        self._kit.status.report(report)

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

    def _settle(self, job: OpenJobEntry, calls: list[Intent], choice: Choice) -> None:
        start = job.briefing
        arbiter, lane = self._kit.kernel.arbiter, core_lane(start.job_name)
        for intent in calls:
            result = unknown_outcome(intent.tool, idempotent=False)
            answer = ToolResultCommitted(call_id=intent.call_id, tool=intent.tool, result=result)
            arbiter.commit(lane, answer)
        tools = ", ".join(intent.tool for intent in calls)
        if choice == "abort":
            report = f"aborted by the operator after a crash interrupted {tools}"
            stopped = CoreStopped(
                job_name=start.job_name, job_id=start.job_id, outcome="cancelled", report=report
            )
            arbiter.commit(lane, stopped)
            text = f"core job {start.job_name} cancelled: {report}"
            arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="core_report"))
            self._kit.report(lane, "CORE_TERMINATED")  # no longer shown as held
            arbiter.policy.end_job(start.job_name)
            self._kit.memories.forget(lane)
            return
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

    def _recreate(self, open_job: OpenJobEntry, start: CoreJobStart) -> None:
        """The job again, under its lane, continuing from its committed window.

        Its budgets and working memory were restored with the session (`RestoredSession.attach`);
        without that (a kernel built by hand), they are opened here and the memory is folded
        from the log.
        """
        kit, name = self._kit, start.job_name
        arbiter = kit.kernel.arbiter
        if name not in arbiter.policy.budgets.jobs:
            budget = start.tool_constraints.time_budget_ms or None
            refused = arbiter.policy.start_job(name, time_budget_ms=budget)
            if refused is not None:
                log.error("could not resume core job", fields={"job": name, "why": refused})
                return
        job = CoreJob(start, core_lane(name), steps=open_job.steps)
        self._runner.jobs[name] = job
        self._runner.move(job, "job_start")
        if job.lane not in kit.memories.lanes:
            memory = WorkingMemory(job.lane, window_start_rev=open_job.started_rev + 1)
            kit.memories.track(memory.observe_all(kit.kernel.log))
        job.task = asyncio.get_running_loop().create_task(self._resumed(job), name=job.lane)
        log.info("core job resumed", fields={"job": name})

    async def _resumed(self, job: CoreJob) -> None:
        """Finish the interrupted turn with its committed call ids, then run on."""
        arbiter = self._kit.kernel.arbiter
        try:
            for call in self._ledger.unanswered_calls(job.lane):
                await arbiter.propose(ToolProposal(job.lane, call.id, call.name, call.arguments))
        except asyncio.CancelledError:
            self._runner.move(job, "cancel")
            self._runner.end(job, "cancelled", job.cancel_reason or "cancelled")
            raise
        await self._runner.run(job)


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
    "CoreJobRecovery",
    "settle_edge",
    "unknown_outcome",
]
