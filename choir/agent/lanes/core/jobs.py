"""Edge's tools for core jobs (§7.1, §12.7, §12.8): spawn, inject, cancel, list — and the job's
own `choir.core.report`.

Jobs are edge's children: `cancel_all` runs when the edge lane ends, so nothing outlives it.
While any job runs, edge may only read (`gate`, §7.2); a job keeps to its allowed tools.

`choir.core.report` (core lanes only) is how the model states a `plan`, a `progress`, a
`partial_result` or a `need_info` question (§12.7): each becomes a committed `CoreEventEmitted`
in the job's lane — replicated like every event, in edge's window, and relayed to the user's DM
by the briefing's verbosity (`core_stream.relay`). A `need_info` call then *waits*, the job in
CORE_WAITING_INFO, until edge answers with `choir.core.inject` (the answer reaches the model as
the `[INJECTED]` instruction after the call's result), the job's time runs out, or the agent
stops.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from choir.agent.kernel.dispatch import LaneHook
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.kernel.registry import RegisteredTool
from choir.agent.lanes.core.runner import CoreJob, CoreJobRunner
from choir.agent.lanes.core.stream import REPORT_TOOL, relay, report_event
from choir.agent.lanes.support import LaneKit
from choir.agent.stopping import STOPPING
from choir.core.memory.working import WorkingMemory
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    CoreJobStart,
    CoreStarted,
    ToolResult,
    core_lane,
    job_name_of,
    validation_problems,
)
from choir.protocol.input_fix import invalid_input, pydantic_fix
from choir.protocol.log.core_jobs import CoreNeedInfo

log = get_logger("choir.agent.core")

CORE_PREFIX: Final = "choir.core."
READ_ONLY: Final = frozenset({"none", "read"})


class CoreJobTools:
    """The lane hooks of `choir.core.*` and edge's gate, over the session's `CoreJobRunner`."""

    def __init__(self, kit: LaneKit, runner: CoreJobRunner) -> None:
        self._kit = kit
        self._runner = runner

    def hooks(self) -> dict[str, LaneHook]:
        return {
            "choir.core.spawn": self._spawn,
            "choir.core.inject": self._inject,
            "choir.core.cancel": self._cancel,
            "choir.core.list": self._list,
            REPORT_TOOL: self._report_hook,
        }

    def gate(
        self, lane: str, tool: RegisteredTool, arguments: Mapping[str, Any]
    ) -> ToolResult | None:
        """Edge is read-only while cores run (§7.2); a job keeps to its allowed tools."""
        if lane == EDGE_LANE:
            side_effect = tool.manifest.runtime.side_effect
            if (
                self._runner.jobs
                and side_effect not in READ_ONLY
                and not tool.name.startswith(CORE_PREFIX)
            ):
                running = ", ".join(sorted(self._runner.jobs))
                return ToolResult.fail(
                    "edge_read_only",
                    f"{tool.name} changes things, and edge may only read while core jobs run "
                    f"({running}); hand the work to a core job or wait for it to finish",
                )
            return None
        job = self._runner.jobs.get(job_name_of(lane) or "")
        allowed = job.start.tool_constraints.allowed_tools if job else []
        if allowed and tool.name not in allowed and tool.name != REPORT_TOOL:
            return ToolResult.fail(
                "tool_not_allowed",
                f"{tool.name} is not among this job's allowed tools: {', '.join(allowed)}",
            )
        return None

    # -- the hooks ---------------------------------------------------------------------------

    async def _spawn(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        try:
            start = briefing(arguments)
        except ValidationError as exc:
            return invalid_input(proposal.tool, validation_problems(exc), pydantic_fix(exc))
        name = start.job_name
        arbiter = self._kit.kernel.arbiter
        budget = start.tool_constraints.time_budget_ms or None
        refused = arbiter.policy.start_job(name, time_budget_ms=budget)
        if refused is not None:
            return ToolResult.fail("job_refused", refused)
        job = CoreJob(start, core_lane(name))
        self._runner.jobs[name] = job
        self._runner.move(job, "job_start")
        entry = arbiter.commit(job.lane, CoreStarted(job=start))
        self._kit.memories.track(WorkingMemory(job.lane, window_start_rev=entry.rev + 1))
        job.task = asyncio.get_running_loop().create_task(self._runner.run(job), name=job.lane)
        return ToolResult.ok(f"core job {name} started", job_name=name, job_id=start.job_id)

    async def _inject(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        name, content = str(arguments.get("job_name", "")), str(arguments.get("content", ""))
        job = self._runner.jobs.get(name)
        if job is None:
            return self._not_running(name)
        refused = self._runner.inject(name, content, "edge")
        if refused is not None:
            return ToolResult.fail("budget_exceeded", refused, budget="max_injections_per_job")
        if job.state == "CORE_WAITING_INFO":
            return ToolResult.ok(f"answer delivered to core job {name}, which was waiting for it")
        return ToolResult.ok(f"instruction queued for core job {name}; it reads it next step")

    async def _cancel(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        name = str(arguments.get("job_name", ""))
        if not self._runner.cancel(name, "cancelled by edge"):
            return self._not_running(name)
        return ToolResult.ok(f"core job {name} is being cancelled; its report will follow")

    async def _list(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        jobs = [
            {"job_name": name, "job_id": job.start.job_id, "state": job.state, "steps": job.steps}
            | ({"question": job.question} if job.question else {})
            for name, job in sorted(self._runner.jobs.items())
        ]
        return ToolResult.ok(f"{len(jobs)} core job(s) running", jobs=jobs)

    def _not_running(self, name: str) -> ToolResult:
        known = ", ".join(sorted(self._runner.jobs)) or "none"
        return ToolResult.fail(
            "job_not_running", f"no core job named {name!r} is running (running: {known})"
        )

    # -- choir.core.report (core lanes) -------------------------------------------------------

    async def _report_hook(self, proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        job = self._runner.jobs.get(job_name_of(proposal.lane) or "")
        if job is None:
            return ToolResult.fail("job_not_running", f"{REPORT_TOOL} is for a running core job")
        event = report_event(arguments, self._kit.kernel.workspace)
        if isinstance(event, ToolResult):
            return event
        self._runner.emit(job, event)
        told = relay(job.start.job_name, event, job.start.verbosity)
        if told is not None:
            category, text = told
            reply = AgentReplied(text=text, category=category)
            self._kit.kernel.arbiter.commit(EDGE_LANE, reply)
        if isinstance(event, CoreNeedInfo):
            return await self._await_answer(job, event.question)
        return ToolResult.ok(f"{event.kind} reported to edge")

    async def _await_answer(self, job: CoreJob, question: str) -> ToolResult:
        """CORE_WAITING_INFO until edge injects, the job's time runs out or the agent stops."""
        self._runner.move(job, "need_info")
        job.question = question
        if not job.injections:
            job.answered.clear()
        left_ms = self._kit.kernel.arbiter.policy.remaining(job.lane).get("per_job_wall_time_ms", 0)
        answered = asyncio.ensure_future(job.answered.wait())
        stopping = asyncio.ensure_future(self._kit.drain.wait())
        try:
            await asyncio.wait(
                {answered, stopping}, timeout=left_ms / 1000, return_when="FIRST_COMPLETED"
            )
        finally:
            for waiter in (answered, stopping):
                waiter.cancel()
            job.question = None
            if job.state == "CORE_WAITING_INFO":
                self._runner.move(job, "info_received" if job.injections else "no_answer")
        if job.injections:
            return ToolResult.ok("edge answered: the answer follows as an [INJECTED] instruction")
        if self._kit.drain.draining:
            return ToolResult.fail(STOPPING, "no answer came before the agent stopped")
        job.waited_out = True
        return ToolResult.fail("no_answer", "no answer came within the job's time budget")


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


__all__ = ["CORE_PREFIX", "READ_ONLY", "CoreJobTools", "briefing"]
