"""The core job task (§7.3): one named job's loop, from its briefing to its report.

A job runs in a task of its own: prompt from its `CoreJobStart` briefing and its own window, one
LLM call per step, tool calls through the arbiter, until the model answers without a tool call —
that answer is the job's report. Every job that ends commits `CoreStopped` and, in edge's lane, a
`core_report` reply, so the user always hears the outcome (§7.1's mandatory completion report).
Cancelling a job cancels its task at its next await; a tool call in flight gets a committed
`cancelled` result from the arbiter.

Graceful stop (`stopping.Drain`): a job checks the drain before each step, so the call it has in
flight finishes and commits and no next step starts. It then ends with a report — or, when the
session resumes after the stop, is left open for the resumed agent to continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Final, Literal

from choir.adapters.llm.client import LlmError, RateLimitNotice
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.lanes.core.budget_ask import (
    BudgetAsk,
    Shortfall,
    asked_notice,
    grant,
    of_budget,
    of_spend,
    resumed_notice,
)
from choir.agent.lanes.core.stream import (
    BUDGET_EXCEEDED,
    FOCUS_CHARS,
    REPORT_TOOL,
    SUMMARY_CHARS,
    Ended,
    Outcome,
    args_view,
    clip,
    error_code,
    focus,
)
from choir.agent.lanes.core.watchdog import WallTimeUp, wall_clock
from choir.agent.lanes.spend import SpendCapReached
from choir.agent.lanes.support import LaneKit
from choir.core.budgets import (
    JOB_EXTENDABLE,
    SESSION_EXTENDABLE,
    Exceeded,
    wall_time_spent,
)
from choir.core.lane_states import CoreTrigger, core_step
from choir.core.prompt.build import core_prompt
from choir.core.prompt.window import ShownEvents
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    CoreEvent,
    CoreEventEmitted,
    CoreJobStart,
    CoreStopped,
    InjectedInstruction,
    job_name_of,
)
from choir.protocol.log.core_jobs import (
    CoreError,
    CoreFinalResult,
    CoreProgress,
    CoreThoughtSummary,
    CoreToolProposal,
)
from choir.protocol.log.lanes import CoreStatus

log = get_logger("choir.agent.core")

InjectionSource = Literal["user", "edge"]

STOPPED_REPORT: Final = "stopped at a safe point: the agent is stopping"
"""The report of a job a graceful stop ended (its last step's work is committed)."""


@dataclass(slots=True)
class CoreJob:
    """One running job."""

    start: CoreJobStart
    lane: str
    state: CoreStatus = "CORE_IDLE"
    steps: int = 0
    injections: list[tuple[str, InjectionSource]] = field(default_factory=list)
    """Instructions for the next step, and who gave each (edge, or the user from a DM's job
    card or `choirctl session inject`)."""
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when an instruction comes: ends a `need_info` wait."""
    question: str | None = None
    """The `need_info` question the job is waiting on (CORE_WAITING_INFO), for `choir.core.list`."""
    waited_out: bool = False
    """Its `need_info` wait ended with its wall time: the step's end pauses it for the budget.
    The wait ends at the deadline to the millisecond, where `check_wall_time` (elapsed *past*
    the limit) may still let one more model call go."""
    task: asyncio.Task[None] | None = None
    cancel_reason: str | None = None
    stopped: bool = False
    shown: ShownEvents = field(default_factory=ShownEvents)
    """The job's window events as messages, kept from one step's prompt to the next."""


class CoreJobRunner:
    """The session's running jobs and their tasks.

    Edge's `choir.core.*` tools (`CoreJobTools`) and crash recovery (`CoreJobRecovery`) hold
    the runner of their session and start, move and end jobs through it.
    """

    def __init__(self, kit: LaneKit, asker: BudgetAsk | None = None) -> None:
        self._kit = kit
        self.asker = asker or BudgetAsk(None)
        """Asks a human to extend a budget that ran out (issue 19); without a bridge, no one."""
        self.jobs: dict[str, CoreJob] = {}
        """The running jobs by name."""

    @property
    def running(self) -> bool:
        return bool(self.jobs)

    def job_of(self, lane: str) -> str | None:
        """The id of the job running in `lane` (for its token, §7.5(3)), or None."""
        job = self.jobs.get(job_name_of(lane) or "")
        return job.start.job_id if job is not None and not job.stopped else None

    def inject(self, job_name: str, content: str, source: InjectionSource) -> str | None:
        """Queue an instruction for the job's next step (§12.8), answering a `need_info`
        wait; why not (no such job, or its injection budget spent), else None."""
        job = self.jobs.get(job_name)
        if job is None:
            known = ", ".join(sorted(self.jobs)) or "none"
            return f"no core job named {job_name!r} is running (running: {known})"
        policy = self._kit.kernel.arbiter.policy
        refused = policy.charge_injection(job_name)
        if refused is not None:
            return refused
        job.injections.append((content, source))
        job.answered.set()
        run = policy.skill_runs.get(job.lane)
        if run is not None and run.active:
            interrupted = policy.interrupt_skill(job.lane)
            if interrupted is not None:
                log.info("skill not interrupted", fields={"job": job_name, "why": interrupted})
        return None

    def cancel(self, job_name: str, reason: str) -> bool:
        """Cancel a running job; False when there is none of that name."""
        job = self.jobs.get(job_name)
        if job is None or job.task is None:
            return False
        job.cancel_reason = reason
        self._kit.kernel.arbiter.policy.interrupt_skill(job.lane)
        job.task.cancel()
        return True

    async def cancel_all(self, reason: str) -> None:
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        for name in list(self.jobs):
            self.cancel(name, reason)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def settled(self) -> None:
        """Graceful stop: wait until every job has ended at its safe point."""
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        if tasks:
            await asyncio.wait(tasks)

    # -- the job task ------------------------------------------------------------------------

    async def run(self, job: CoreJob) -> None:
        """The job's task: its steps until it ends, then `end` (committed and reported)."""
        try:
            ended = await self._loop(job)
        except asyncio.CancelledError:
            self.move(job, "cancel")
            self.end(job, "cancelled", job.cancel_reason or "cancelled")
            raise
        except Exception as exc:  # a bug must end the job with a report, not silently
            log.exception("core job crashed", fields={"job": job.start.job_name})
            self.move(job, "error")
            ended = Ended("terminated", f"the job failed: {exc}")
        if ended is None:
            self.move(job, "shutdown")
            self.end(job, "cancelled", STOPPED_REPORT)
        else:
            self.end(job, *ended)

    async def _loop(self, job: CoreJob) -> Ended | None:
        """Steps until the job ends: its outcome and report, or None at a graceful stop.

        A budget (§7.6) that runs out — at the check before a step, a call refused for one (a
        budget lowered by a config reload included), or the wall-time watchdog cutting a step —
        or the spend cap refusing the step's model call pauses the job to ask a human to extend
        it (`_paused`); it ends the job when nobody extends it.
        """
        kit, arbiter = self._kit, self._kit.kernel.arbiter
        self.move(job, "initialized")
        while True:
            if kit.drain.draining:
                return None
            if job.state == "CORE_REASONING":
                self._drain(job)
            outcome: Ended | Exceeded | Shortfall | None = arbiter.policy.begin_step_or_exceeded(
                job.lane
            )
            if outcome is None:
                if job.state == "CORE_INITIALIZING":
                    self.move(job, "llm_called")
                try:
                    async with wall_clock(arbiter.policy, job.lane):
                        outcome = await self._step(job)
                except WallTimeUp:
                    outcome = self._timed_out(job)
                if outcome is None and job.waited_out:
                    outcome = self._timed_out(job)
                job.waited_out = False
            if isinstance(outcome, Exceeded):
                outcome = of_budget(outcome, job.start)
            if isinstance(outcome, Shortfall):
                outcome = await self._paused(job, outcome)
            if outcome is not None:
                return outcome

    async def _paused(self, job: CoreJob, short: Shortfall) -> Ended | None:
        """Ask to extend `short`: None once extended (or a stop began), else the job's end.

        The time spent waiting for the answer is granted to the job's wall time: a human's
        pace is not the job's work.
        """
        policy, name = self._kit.kernel.arbiter.policy, job.start.job_name
        if not self.asker.can_ask or self._kit.drain.draining:
            self.move(job, "budget_exceeded")
            return Ended("terminated", short.message, BUDGET_EXCEEDED)
        self.move(job, "budget_ask")
        began = time.monotonic()
        answer = await self.asker.ask(short, self._kit.drain, self._asked)
        waited_ms = round((time.monotonic() - began) * 1000)
        if waited_ms > 0:
            policy.extend("per_job_wall_time_ms", waited_ms, name)
        if self._kit.drain.draining:
            return None
        if answer.granted is None:
            self.move(job, "budget_exceeded")
            return Ended("terminated", f"{short.message}; {answer.why}", BUDGET_EXCEEDED)
        grant(short, answer.granted, policy, self._kit.spend)
        self.move(job, "budget_extended")
        self._tell(resumed_notice(short, answer.granted))
        return None

    def _asked(self, approval_id: str, short: Shortfall) -> None:
        self._tell(asked_notice(approval_id, short))

    def _tell(self, text: str) -> None:
        self._kit.kernel.arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="notice"))

    async def _step(self, job: CoreJob) -> Ended | Exceeded | Shortfall | None:
        """One LLM call and its tool calls: the job's end, a budget a call was refused for (or
        the spend cap that refused the model call), or None to go on."""
        kit, arbiter = self._kit, self._kit.kernel.arbiter
        job.steps += 1
        self.emit(job, CoreProgress(phase=f"step {job.steps}", focus=focus(job.start)))
        allowed = job.start.tool_constraints.allowed_tools
        tools = kit.tools(job.lane, [*allowed, REPORT_TOOL] if allowed else None)
        prompt = core_prompt(
            kit.memories.lanes[job.lane],
            soul_core_md=kit.identity.soul_core_md,
            briefing=job.start,
            skills=kit.skills(),
            skill_view=kit.skill_view(job.lane),
            window_size=kit.window_size,
            result_view=kit.kernel.registry.result_for_prompt,
            shown=job.shown,
        )
        kit.compaction.measure(job.lane, prompt.size(tools))
        try:
            completion = await kit.complete(
                job.lane,
                list(prompt.messages),
                tools,
                self._rate_limited(job),
                job_id=job.start.job_id,
            )
        except SpendCapReached as refused:
            return of_spend(refused, job.start)
        except (LlmError, ChoirError) as error:
            self.move(job, "llm_error")
            return Ended("terminated", f"the model call failed: {error.message}")
        calls = kit.record(job.lane, completion)
        if not calls and not completion.invalid_tool_calls:
            self.move(job, "final_result")
            return Ended("completed", completion.text.strip() or "done (the job gave no summary)")
        self.move(job, "tool_proposal")
        text = completion.text.strip()
        if calls and text:
            self.emit(job, CoreThoughtSummary(summary=clip(text, SUMMARY_CHARS)))
        over: Ended | Exceeded | None = None
        for call in calls:
            if call.name != REPORT_TOOL:  # a report is its own event
                why = clip(text, FOCUS_CHARS)
                args = args_view(call.arguments)
                self.emit(job, CoreToolProposal(tool=call.name, args=args, why=why))
            proposal = ToolProposal(job.lane, call.id, call.name, call.arguments)
            result = await arbiter.propose(proposal)
            if result.error_code == BUDGET_EXCEEDED and over is None:
                over = self._refused_for(job, result.data.get("budget"), result.summary)
        if over is not None:
            return over  # the step's other calls got their answers: a safe point
        self.move(job, "tool_result")
        return None

    def _timed_out(self, job: CoreJob) -> Exceeded:
        """The budget of a job whose watchdog cancelled its step at the wall-time deadline."""
        policy = self._kit.kernel.arbiter.policy
        return wall_time_spent(policy.budgets, job.start.job_name, time.monotonic(), policy.limits)

    def _refused_for(self, job: CoreJob, budget: object, summary: str) -> Ended | Exceeded:
        """The budget a call was refused for, as it stands now (one nobody may extend: the
        job's end)."""
        policy = self._kit.kernel.arbiter.policy
        if isinstance(budget, str) and budget in JOB_EXTENDABLE | SESSION_EXTENDABLE:
            return policy.exceeded(budget, job.start.job_name)
        self.move(job, "budget_exceeded")
        return Ended("terminated", summary, BUDGET_EXCEEDED)

    def _rate_limited(self, job: CoreJob) -> RateLimitNotice:
        """One notice to the user per rate-limited call of the job, as edge gives (§10)."""

        async def notice(wait_s: float) -> None:
            text = f"core job {job.start.job_name} is rate-limited; retrying in {wait_s:.0f} s"
            self._kit.kernel.arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="notice"))

        return notice

    def _drain(self, job: CoreJob) -> None:
        """The job's safe point: instructions edge injected since its last step (§12.8)."""
        while job.injections:
            content, source = job.injections.pop(0)
            event = InjectedInstruction(target=job.lane, content=content, source=source)
            self._kit.kernel.arbiter.commit(job.lane, event)
            self.move(job, "instruction_injected")

    def end(self, job: CoreJob, outcome: Outcome, report: str, code: str | None = None) -> None:
        """End the job (once): committed, reported to the user — or, at a stop the session resumes
        from, left open (no `CoreStopped`) for the resumed agent to continue."""
        if job.stopped:
            return
        job.stopped = True
        name, arbiter, drain = job.start.job_name, self._kit.kernel.arbiter, self._kit.drain
        left_open = drain.draining and drain.resumes and outcome == "cancelled"
        if left_open:
            log.info("core job left open for the resumed session", fields={"job": name})
        else:
            self._report(job, outcome, report, code)
        arbiter.policy.end_job(name)
        self.jobs.pop(name, None)
        self._kit.memories.forget(job.lane)

    def _report(self, job: CoreJob, outcome: Outcome, report: str, code: str | None) -> None:
        name, arbiter = job.start.job_name, self._kit.kernel.arbiter
        if outcome == "completed":
            self.emit(job, CoreFinalResult(summary=report))
        else:
            code = code or error_code(outcome, report)
            self.emit(job, CoreError(code=code, message=report))
        stopped = CoreStopped(
            job_name=name, job_id=job.start.job_id, outcome=outcome, report=report
        )
        arbiter.commit(job.lane, stopped)
        text = f"core job {name} {outcome}: {report}"
        arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="core_report"))

    def emit(self, job: CoreJob, event: CoreEvent) -> None:
        """A structured event of the job's stream (§12.7) — never raw model reasoning."""
        emitted = CoreEventEmitted(job_name=job.start.job_name, event=event)
        self._kit.kernel.arbiter.commit(job.lane, emitted)

    def move(self, job: CoreJob, trigger: CoreTrigger) -> None:
        """Step the job's state machine and report the new state."""
        job.state = core_step(job.state, trigger)
        self._kit.report(job.lane, job.state)


__all__ = ["STOPPED_REPORT", "CoreJob", "CoreJobRunner"]
