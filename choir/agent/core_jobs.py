"""Core jobs (§7.3, §12.7, §12.8): named background workers that edge spawns, instructs, cancels.

A job is a task of its own running the core loop: prompt from its `CoreJobStart` briefing and its
own window, one LLM call per step, tool calls through the arbiter, until the model answers
without a tool call — that answer is the job's report. Every job ends with a committed
`CoreStopped` and, in edge's lane, a `core_report` reply so the user always hears the outcome
(§7.1's mandatory completion report). Cancelling a job cancels its task at its next await; a
tool call in flight gets a committed `cancelled` result from the arbiter.

Jobs are edge's children: `cancel_all` runs when the edge lane ends, so nothing outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import ValidationError

from choir.adapters.llm import LlmError, RateLimitNotice
from choir.agent.arbiter import ToolProposal
from choir.agent.dispatch import LaneHook
from choir.agent.lane_support import LaneKit
from choir.agent.registry import RegisteredTool
from choir.core.lane_states import CoreTrigger, core_step
from choir.core.prompt import core_prompt
from choir.core.prompt_window import json_text
from choir.core.working_memory import WorkingMemory
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    CoreEvent,
    CoreEventEmitted,
    CoreJobStart,
    CoreStarted,
    CoreStopped,
    InjectedInstruction,
    ToolResult,
    core_lane,
    job_name_of,
    validation_problems,
)
from choir.protocol.core_jobs import (
    CoreError,
    CoreFinalResult,
    CoreProgress,
    CoreThoughtSummary,
    CoreToolProposal,
)
from choir.protocol.lanes import CoreStatus

log = get_logger("choir.agent.core")

Outcome = Literal["completed", "terminated", "cancelled"]

CORE_PREFIX: Final = "choir.core."
READ_ONLY: Final = frozenset({"none", "read"})
FOCUS_CHARS: Final = 120
"""Longest `focus` a progress event carries."""
SUMMARY_CHARS: Final = 500
"""Longest `thought_summary` an event carries: the visible text of a tool-calling step."""
ARG_CHARS: Final = 200
"""Longest string argument a `tool_proposal` event carries; longer ones are clipped."""


@dataclass(slots=True)
class CoreJob:
    """One running job."""

    start: CoreJobStart
    lane: str
    state: CoreStatus = "CORE_IDLE"
    steps: int = 0
    injections: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    cancel_reason: str | None = None
    stopped: bool = False


class CoreJobs:
    """The session's core jobs and the lane hooks of `choir.core.*`."""

    def __init__(self, kit: LaneKit) -> None:
        self._kit = kit
        self._jobs: dict[str, CoreJob] = {}

    @property
    def running(self) -> bool:
        return bool(self._jobs)

    def hooks(self) -> dict[str, LaneHook]:
        return {
            "choir.core.spawn": self._spawn,
            "choir.core.inject": self._inject,
            "choir.core.cancel": self._cancel,
            "choir.core.list": self._list,
        }

    def gate(
        self, lane: str, tool: RegisteredTool, arguments: Mapping[str, Any]
    ) -> ToolResult | None:
        """Edge is read-only while cores run (§7.2); a job keeps to its allowed tools."""
        if lane == EDGE_LANE:
            side_effect = tool.manifest.runtime.side_effect
            if (
                self._jobs
                and side_effect not in READ_ONLY
                and not tool.name.startswith(CORE_PREFIX)
            ):
                running = ", ".join(sorted(self._jobs))
                return ToolResult.fail(
                    "edge_read_only",
                    f"{tool.name} changes things, and edge may only read while core jobs run "
                    f"({running}); hand the work to a core job or wait for it to finish",
                )
            return None
        job = self._jobs.get(job_name_of(lane) or "")
        allowed = job.start.tool_constraints.allowed_tools if job else []
        if allowed and tool.name not in allowed:
            return ToolResult.fail(
                "tool_not_allowed",
                f"{tool.name} is not among this job's allowed tools: {', '.join(allowed)}",
            )
        return None

    def cancel(self, job_name: str, reason: str) -> bool:
        """Cancel a running job; False when there is none of that name."""
        job = self._jobs.get(job_name)
        if job is None or job.task is None:
            return False
        job.cancel_reason = reason
        self._kit.kernel.arbiter.interrupt_skill(job.lane)
        job.task.cancel()
        return True

    async def cancel_all(self, reason: str) -> None:
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        for name in list(self._jobs):
            self.cancel(name, reason)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the hooks ---------------------------------------------------------------------------

    async def _spawn(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        try:
            start = briefing(arguments)
        except ValidationError as exc:
            problems = validation_problems(exc)
            return ToolResult.fail(
                "invalid_input", f"invalid job: {problems[0]}", problems=problems
            )
        name = start.job_name
        arbiter = self._kit.kernel.arbiter
        budget = start.tool_constraints.time_budget_ms or None
        refused = arbiter.start_job(name, time_budget_ms=budget)
        if refused is not None:
            return ToolResult.fail("job_refused", refused)
        job = CoreJob(start, core_lane(name))
        self._jobs[name] = job
        self._move(job, "job_start")
        entry = arbiter.commit(job.lane, CoreStarted(job=start))
        self._kit.memories.track(WorkingMemory(job.lane, window_start_rev=entry.rev + 1))
        job.task = asyncio.get_running_loop().create_task(self._run(job), name=job.lane)
        return ToolResult.ok(f"core job {name} started", job_name=name, job_id=start.job_id)

    async def _inject(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        name, content = str(arguments.get("job_name", "")), str(arguments.get("content", ""))
        job = self._jobs.get(name)
        if job is None:
            return self._not_running(name)
        refused = self._kit.kernel.arbiter.charge_injection(name)
        if refused is not None:
            return ToolResult.fail("budget_exceeded", refused, budget="max_injections_per_job")
        job.injections.append(content)
        run = self._kit.kernel.arbiter.skill_runs.get(job.lane)
        if run is not None and run.active:
            refused = self._kit.kernel.arbiter.interrupt_skill(job.lane)
            if refused is not None:
                log.info("skill not interrupted", fields={"job": name, "why": refused})
        return ToolResult.ok(f"instruction queued for core job {name}; it reads it next step")

    async def _cancel(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        name = str(arguments.get("job_name", ""))
        if not self.cancel(name, "cancelled by edge"):
            return self._not_running(name)
        return ToolResult.ok(f"core job {name} is being cancelled; its report will follow")

    async def _list(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        jobs = [
            {"job_name": name, "job_id": job.start.job_id, "state": job.state, "steps": job.steps}
            for name, job in sorted(self._jobs.items())
        ]
        return ToolResult.ok(f"{len(jobs)} core job(s) running", jobs=jobs)

    def _not_running(self, name: str) -> ToolResult:
        known = ", ".join(sorted(self._jobs)) or "none"
        return ToolResult.fail(
            "job_not_running", f"no core job named {name!r} is running (running: {known})"
        )

    # -- the job task ------------------------------------------------------------------------

    async def _run(self, job: CoreJob) -> None:
        try:
            outcome, report = await self._loop(job)
        except asyncio.CancelledError:
            self._move(job, "cancel")
            self._stop(job, "cancelled", job.cancel_reason or "cancelled")
            raise
        except Exception as exc:  # a bug must end the job with a report, not silently
            log.exception("core job crashed", fields={"job": job.start.job_name})
            self._move(job, "error")
            outcome, report = "terminated", f"the job failed: {exc}"
        self._stop(job, outcome, report)

    async def _loop(self, job: CoreJob) -> tuple[Outcome, str]:
        kit, arbiter = self._kit, self._kit.kernel.arbiter
        self._move(job, "initialized")
        while True:
            if job.state == "CORE_REASONING":
                self._drain(job)
            refused = arbiter.begin_step(job.lane)
            if refused is not None:
                self._move(job, "budget_exceeded")
                return "terminated", refused
            if job.state == "CORE_INITIALIZING":
                self._move(job, "llm_called")
            job.steps += 1
            self._emit(job, CoreProgress(phase=f"step {job.steps}", focus=_focus(job)))
            tools = kit.tools(job.lane, job.start.tool_constraints.allowed_tools)
            prompt = core_prompt(
                kit.memories.lanes[job.lane],
                soul_core_md=kit.identity.soul_core_md,
                briefing=job.start,
                skills=kit.skills(),
                skill_view=kit.skill_view(job.lane),
                window_size=kit.window_size,
                result_view=kit.kernel.registry.result_for_prompt,
            )
            kit.compaction.measure(job.lane, prompt.size(tools))
            try:
                completion = await kit.complete(
                    job.lane, list(prompt.messages), tools, self._rate_limited(job)
                )
            except (LlmError, ChoirError) as error:
                self._move(job, "llm_error")
                return "terminated", f"the model call failed: {error.message}"
            calls = kit.record(job.lane, completion)
            if not calls and not completion.invalid_tool_calls:
                self._move(job, "final_result")
                return "completed", completion.text.strip() or "done (the job gave no summary)"
            self._move(job, "tool_proposal")
            text = completion.text.strip()
            if calls and text:
                self._emit(job, CoreThoughtSummary(summary=_clip(text, SUMMARY_CHARS)))
            for call in calls:
                why = _clip(text, FOCUS_CHARS)
                proposed = CoreToolProposal(
                    tool=call.name, args=_args_view(call.arguments), why=why
                )
                self._emit(job, proposed)
                await arbiter.propose(ToolProposal(job.lane, call.id, call.name, call.arguments))
            self._move(job, "tool_result")

    def _rate_limited(self, job: CoreJob) -> RateLimitNotice:
        """One notice to the user per rate-limited call of the job, as edge gives (§10)."""

        async def notice(wait_s: float) -> None:
            text = f"core job {job.start.job_name} is rate-limited; retrying in {wait_s:.0f} s"
            self._kit.kernel.arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="notice"))

        return notice

    def _drain(self, job: CoreJob) -> None:
        """The job's safe point: instructions edge injected since its last step (§12.8)."""
        while job.injections:
            content = job.injections.pop(0)
            event = InjectedInstruction(target=job.lane, content=content, source="edge")
            self._kit.kernel.arbiter.commit(job.lane, event)
            self._move(job, "instruction_injected")

    def _stop(self, job: CoreJob, outcome: Outcome, report: str) -> None:
        if job.stopped:
            return
        job.stopped = True
        name, arbiter = job.start.job_name, self._kit.kernel.arbiter
        stopped = CoreStopped(
            job_name=name, job_id=job.start.job_id, outcome=outcome, report=report
        )
        if outcome == "completed":
            self._emit(job, CoreFinalResult(summary=report))
        else:
            self._emit(job, CoreError(code=_error_code(outcome, report), message=report))
        arbiter.commit(job.lane, stopped)
        arbiter.end_job(name)
        self._jobs.pop(name, None)
        self._kit.memories.forget(job.lane)
        text = f"core job {name} {outcome}: {report}"
        arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="core_report"))

    def _emit(self, job: CoreJob, event: CoreEvent) -> None:
        """A structured event of the job's stream (§12.7) — never raw model reasoning."""
        emitted = CoreEventEmitted(job_name=job.start.job_name, event=event)
        self._kit.kernel.arbiter.commit(job.lane, emitted)

    def _move(self, job: CoreJob, trigger: CoreTrigger) -> None:
        job.state = core_step(job.state, trigger)
        self._kit.report(job.lane, job.state)


def _focus(job: CoreJob) -> str:
    """What the job is on, for its progress event: the first line of its task, clipped."""
    first = job.start.task_spec.strip().splitlines()[0] if job.start.task_spec.strip() else ""
    return first[:FOCUS_CHARS]


def _clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _args_view(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments for its `tool_proposal` event: long strings clipped, and a
    nested value longer than ARG_CHARS once written out replaced by its clipped text."""
    view: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            view[key] = _clip(value, ARG_CHARS)
        elif isinstance(value, (dict, list)) and len(text := json_text(value)) > ARG_CHARS:
            view[key] = _clip(text, ARG_CHARS)
        else:
            view[key] = value
    return view


def _error_code(outcome: Outcome, report: str) -> str:
    if outcome == "cancelled":
        return "cancelled"
    if report.startswith("the model call failed"):
        return "llm_error"
    return "budget_exceeded" if "budget" in report else "job_failed"


def briefing(arguments: Mapping[str, Any]) -> CoreJobStart:
    """The `CoreJobStart` of a `choir.core.spawn` call (ValidationError when it is not one)."""
    constraints = {
        key: arguments[key] for key in ("allowed_tools", "time_budget_ms") if key in arguments
    }
    fields = {
        key: arguments[key]
        for key in (
            "job_name",
            "task_spec",
            "context_bundle",
            "output_schema",
            "verbosity",
            "skill",
        )
        if key in arguments
    }
    return CoreJobStart.model_validate(
        {"job_id": uuid.uuid4().hex, "tool_constraints": constraints, **fields}
    )
