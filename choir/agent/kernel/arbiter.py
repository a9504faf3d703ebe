"""The arbiter (§7.4): the single writer of the session log and the gate of every side effect.

Lanes submit tool proposals, admitted in arrival order: at once when none waits before them,
else through an asyncio queue the arbiter task serves. For each one the arbiter commits
`ToolCallRequested`, validates it (registry, lane exposure, pluggable gates such as the skill
allowlist and budgets, input schema, workspace paths), then hands the admitted call back to the
proposing lane's task, which runs it: acquire the lockset → commit the intent
(`ToolCallCommitted`) → execute → commit `ToolResultCommitted` → release. Commits are serialized
(the log appends synchronously on the event loop); executions run concurrently under the lock
manager (DESIGN-NOTES "Concurrency"), so two cores writing different files run in parallel and a
slow host tool never blocks another lane's unrelated tool.

Every call carries an invocation id (`call_id`, unique per session — lanes derive it from the
model's id and their step). Re-proposing a committed invocation returns the committed result and
never executes twice (§13.3); re-proposing one in flight joins it.

Cancellation and timeouts (§7.4, §9.4): a call that is stopped — its lane cancelled, its
`timeout_ms` reached, its job ended while it waited for locks — commits `Cancelled` (with its
`call_id`) and then its `cancelled` or `timeout` result. A call that ran commits both while it
still holds its locks, and only after its tool has really stopped: a tool's cancellation ends
its work before it propagates (a thread is waited for, a process group is killed). Meanwhile
the lane simply waits in `propose`, its call still in flight and its locks held (status shows
them), so nothing else is started against those resources until the work is gone. Work that was
past its point of no return when stopped (a write already renaming) finishes; the call then
commits that work's real result, said to have finished as it was being stopped.

Lock keys are located paths (`dispatch`): a call that had to wait for its locks is prepared
again once granted, because a symlink may have moved under it meanwhile; when its keys moved
it gives the old ones back and asks for the new ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from choir.agent.kernel import call_log
from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.kernel.dispatch import Dispatcher, PreparedCall, prepare_call
from choir.agent.kernel.intents import IntentNotDurable, IntentSink
from choir.agent.kernel.lane_policy import LanePolicy
from choir.agent.kernel.locks import Hold, LockManager, LocksRevokedError
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.kernel.records import (
    cancelled,
    finished_anyway,
    intent,
    ms_since,
    requested,
    result_committed,
)
from choir.agent.kernel.registry import RegisteredTool, ToolRegistry, lane_kind_of
from choir.agent.kernel.tool_contract import StopOutcome, stop_outcome
from choir.agent.kernel.workspace import Workspace
from choir.core.budgets import BudgetLimits
from choir.core.skills import runner as skill_runner
from choir.core.skills.runner import CONTROL_TOOLS, Decision
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import (
    META_PREFIX,
    ApprovalResolved,
    Cancelled,
    Event,
    SkillSpec,
    ToolCall,
    ToolResult,
)

log = get_logger("choir.agent.kernel.arbiter")

Gate = Callable[[str, RegisteredTool, Mapping[str, Any]], ToolResult | None]
"""A policy check run at admission: (lane, tool, arguments) → a rejection, or None to admit.
Lanes own the state behind their gates (cores running, stopping), keeping lane logic out."""

_STOP: Final = object()
RELOCATE_ATTEMPTS: Final = 3
"""How often a call whose lock keys moved while it waited asks for the new ones."""


@dataclass(slots=True)
class _Pending:
    proposal: ToolProposal
    admitted: asyncio.Future[PreparedCall | None]
    """Set by the arbiter task: the call to execute, or None when admission already answered."""
    result: asyncio.Future[ToolResult]


class Arbiter:
    """Validates, locks, executes and commits tool calls; the only writer of `log`.

    Budgets and skill runs (`begin_step`, `start_job`, `interrupt_skill`…) are its `policy`'s.
    """

    def __init__(
        self,
        *,
        log: CommitLog,
        registry: ToolRegistry,
        locks: LockManager,
        workspace: Workspace,
        dispatcher: Dispatcher,
        limits: BudgetLimits,
        skills: Mapping[str, SkillSpec] | None = None,
        gates: Sequence[Gate] = (),
        intent_sink: IntentSink | None = None,
    ) -> None:
        self.log = log
        self.locks = locks
        self.policy = LanePolicy(log=log, locks=locks, limits=limits, skills=skills)
        """The session's budgets and skill runs: what each lane may still do."""
        self.registry = registry
        self.workspace = workspace
        self._dispatcher = dispatcher
        self._gates = list(gates)
        self._intent_sink = intent_sink
        self._queue: asyncio.Queue[_Pending | object] = asyncio.Queue()
        self._serving = False
        """While `run` admits proposals (from its start until `stop()` reaches it)."""
        self._results: dict[str, ToolResult] = {}
        self._inflight: dict[str, _Pending] = {}
        self._approvals: dict[str, str] = {}
        """approval id -> the lane whose meta tool asked for it."""
        self._fold_committed_results()

    # -- lanes -------------------------------------------------------------------------------

    async def propose(self, proposal: ToolProposal) -> ToolResult:
        """Submit `proposal` and wait for its committed result.

        The proposal is admitted (here, or by the arbiter task when others wait before it); the
        admitted call then executes in the proposing lane's own task, so lanes run tools
        concurrently, and cancelling a lane cancels its call: the tool is stopped at once and a
        `cancelled` result is committed, which keeps the transcript the model sees valid.
        """
        done = self._results.get(proposal.call_id)
        if done is not None:
            return done
        joined = self._inflight.get(proposal.call_id)
        if joined is not None:
            return await asyncio.shield(joined.result)
        loop = asyncio.get_running_loop()
        pending = _Pending(proposal, loop.create_future(), loop.create_future())
        self._inflight[proposal.call_id] = pending
        if self._serving and self._queue.empty():
            # nothing is waiting to be admitted before it: admitting it now is the order the
            # queue gives, without two task switches (to the arbiter task and back) per call
            self._admit_safely(pending)
        else:
            self._queue.put_nowait(pending)
        try:
            call = await pending.admitted
            if call is not None:
                await self._execute(pending, call)
        except asyncio.CancelledError:  # before the call held locks (it commits its own after)
            self._stopped(pending, "the lane was cancelled", cancelled(proposal))
            raise
        except LocksRevokedError:
            reason = "the job ended while the call waited for its locks"
            self._stopped(pending, reason, cancelled(proposal))
        return pending.result.result()

    def commit(self, lane: str, event: Event) -> LogEntry:
        """Commit a lane's non-tool event (user message, model output, core events…).

        A model output charges its tokens to the session budget (§7.6) as it is committed.
        """
        entry = self.log.commit(lane, event)
        self.policy.observe(lane, event)
        return entry

    def resolve_approval(
        self,
        approval_id: str,
        status: Literal["approved", "applied", "rejected", "failed", "timed_out"],
        reason: str | None = None,
    ) -> LogEntry | None:
        """Commit a proposal's outcome in the lane that proposed it (§8.10); None if unknown."""
        lane = self._approvals.pop(approval_id, None)
        if lane is None:
            return None
        outcome = ApprovalResolved(approval_id=approval_id, status=status, reason=reason)
        return self.commit(lane, outcome)

    def expect_approvals(self, approvals: Mapping[str, str]) -> None:
        """Open approvals (id -> lane) a restored snapshot recorded: events before it are not
        in the log for `_fold_committed_results` to find."""
        self._approvals.update(approvals)

    def add_gate(self, gate: Gate) -> None:
        self._gates.append(gate)

    def committed_result(self, call_id: str) -> ToolResult | None:
        return self._results.get(call_id)

    def unresolved_intents(self) -> list[LogEntry]:
        """Intents with no committed result: after a crash their outcome is unknown (§13)."""
        open_intents: dict[str, LogEntry] = {}
        for entry in self.log:
            kind, call_id = entry.kind, entry.event.get("call_id")
            if kind == "tool_call_committed":
                open_intents[str(call_id)] = entry
            elif kind == "tool_result_committed":
                open_intents.pop(str(call_id), None)
        return list(open_intents.values())

    # -- the arbiter task ----------------------------------------------------------------------

    async def run(self) -> None:
        """Admit proposals in arrival order until `stop()`.

        A proposal made while none waits here is admitted at once by `propose` itself (an
        admission never awaits, so nothing admitted here can be overtaken); this task admits
        those that queue behind one — and every proposal before it runs or after `stop()`.
        """
        self._serving = True
        try:
            while (item := await self._queue.get()) is not _STOP:
                assert isinstance(item, _Pending)
                self._admit_safely(item)
        finally:
            self._serving = False

    def stop(self) -> None:
        self._queue.put_nowait(_STOP)

    def _admit_safely(self, item: _Pending) -> None:
        try:
            self._admit(item)
        except Exception as exc:  # the arbiter never dies on one bad proposal
            log.exception("proposal failed", fields={"tool": item.proposal.tool})
            self._finish(item, ToolResult.fail("internal_error", f"{item.proposal.tool}: {exc}"))

    def _admit(self, pending: _Pending) -> None:
        if pending.admitted.done():  # the proposer was cancelled while queued
            return
        proposal = pending.proposal
        self.log.append(proposal.lane, requested(proposal))
        policy = self.policy
        run = policy.skill_runs.get(proposal.lane)
        if policy.skills and (skill_runner.is_active(run) or proposal.tool in CONTROL_TOOLS):
            call = ToolCall(id=proposal.call_id, name=proposal.tool, arguments=proposal.arguments)
            verdict = skill_runner.propose(run, call, policy.skills)
            if isinstance(verdict, Decision):
                self._settle(pending, verdict)
                return
        prepared = self._validate(proposal)
        if isinstance(prepared, ToolResult):
            self._finish(pending, prepared)
        else:
            pending.admitted.set_result(prepared)

    def _validate(self, proposal: ToolProposal) -> PreparedCall | ToolResult:
        tool = self.registry.get(proposal.tool)
        if tool is None:
            return ToolResult.fail(
                "unknown_tool",
                f"unknown tool {proposal.tool!r}",
                known_tools=self.registry.names_for_lane(proposal.lane),
            )
        exposure = tool.manifest.runtime.exposure
        lane_kind = lane_kind_of(proposal.lane)
        if exposure not in (lane_kind, "both"):
            return ToolResult.fail(
                "tool_not_exposed", f"{proposal.tool} is not available to the {lane_kind} lane"
            )
        for gate in self._gates:
            rejection = gate(proposal.lane, tool, proposal.arguments)
            if rejection is not None:
                return rejection
        invalid = tool.manifest.check_input(proposal.arguments)
        if invalid is not None:
            return invalid
        refused = self.policy.check_job(proposal.lane)
        if refused is not None:
            return refused
        prepared = prepare_call(tool, proposal.arguments, self.workspace)
        if isinstance(prepared, ToolResult):
            return prepared
        return self.policy.charge_call(proposal.lane) or prepared

    async def _execute(self, pending: _Pending, call: PreparedCall) -> None:
        proposal = pending.proposal
        started = time.monotonic()
        hold = await self.locks.acquire(proposal.lane, call.lockset)
        if hold.waited:
            held = await self._relocate(proposal, call, hold)
            if isinstance(held, ToolResult):
                self._finish(pending, held)
                return
            hold, call = held
        granted = time.monotonic()
        wait_ms = int((granted - started) * 1000)
        call_log.lock_waited(proposal.lane, proposal.tool, call.lockset, wait_ms)
        try:
            await self._run_held(pending, call, granted, wait_ms)
        finally:
            hold.release()
            held_ms = ms_since(granted)
            call_log.lock_released(
                proposal.lane, proposal.tool, call.lockset, wait_ms=wait_ms, held_ms=held_ms
            )

    async def _relocate(
        self, proposal: ToolProposal, call: PreparedCall, hold: Hold
    ) -> tuple[Hold, PreparedCall] | ToolResult:
        """After a wait for `hold`: the call prepared again, holding the locks it now needs."""
        for _ in range(RELOCATE_ATTEMPTS):
            again = prepare_call(call.tool, proposal.arguments, self.workspace)
            if isinstance(again, PreparedCall) and again.lockset == call.lockset:
                return hold, again
            hold.release()
            if isinstance(again, ToolResult):
                return again
            call = again
            hold = await self.locks.acquire(proposal.lane, call.lockset)
            if not hold.waited:
                return hold, call
        hold.release()
        return ToolResult.fail(
            "workspace_changing",
            f"the paths of {proposal.tool} kept moving while it waited for its locks; try again",
        )

    async def _run_held(
        self, pending: _Pending, call: PreparedCall, started: float, wait_ms: int
    ) -> None:
        """Intent, execution and result, all under the call's locks (held since `started`,
        after a wait of `wait_ms`)."""
        proposal = pending.proposal
        outcome = StopOutcome()
        token = stop_outcome.set(outcome)
        try:
            committed = self.log.append(proposal.lane, intent(proposal, call, wait_ms))
            await failpoint("arbiter.after_append_before_ack")
            if not call.idempotent and self._intent_sink:
                try:
                    await self._intent_sink(committed)
                except IntentNotDurable as exc:  # never run a side effect choird cannot see
                    self._finish(pending, ToolResult.fail("intent_not_durable", exc.message))
                    return
            await failpoint("tool.after_intent_before_run")
            try:
                result = await self._dispatcher.run(call, proposal)
            except Exception as exc:  # a tool bug must not take the lane or the arbiter down
                log.exception("tool crashed", fields={"tool": proposal.tool})
                result = ToolResult.fail("tool_crashed", f"{proposal.tool} failed: {exc}")
        except asyncio.CancelledError:
            # the tool has stopped (its cancellation ends its work first); locks still held
            if outcome.finished is not None:
                self._finish(pending, finished_anyway(outcome.finished), ms_since(started))
            else:
                result = cancelled(proposal)
                self._stopped(pending, "the lane was cancelled", result, ms_since(started))
            raise
        finally:
            stop_outcome.reset(token)
        await failpoint("tool.after_run_before_result")
        if call.tool.manifest.runtime.meta and "approval_id" in result.data:
            self._approvals[str(result.data["approval_id"])] = proposal.lane
        ran_ms = ms_since(started)
        call_log.tool_ran(proposal.lane, proposal.tool, result.status, ran_ms)
        if result.status == "timeout" and outcome.finished is not None:
            self._finish(pending, finished_anyway(outcome.finished), ran_ms)
        elif result.status == "timeout":
            self._stopped(pending, result.summary, result, ran_ms)
        else:
            self._finish(pending, result, ran_ms)

    def _stopped(
        self, pending: _Pending, reason: str, result: ToolResult, duration_ms: int = 0
    ) -> None:
        """Commit `Cancelled` for a call that was stopped (§7.4), then its result."""
        proposal = pending.proposal
        if proposal.call_id in self._results:
            return
        event = Cancelled(target=proposal.lane, reason=reason, call_id=proposal.call_id)
        self.log.commit(proposal.lane, event)
        self._finish(pending, result, duration_ms)

    def _finish(self, pending: _Pending, result: ToolResult, duration_ms: int = 0) -> None:
        """Commit the result once (inside the lock hold when there is one) and wake waiters.

        What is published is what was committed: the log redacts secret values (`CommitLog`).
        """
        proposal = pending.proposal
        if proposal.call_id in self._results:
            return
        event = result_committed(proposal, result, duration_ms)
        entry = self.log.append(proposal.lane, event)
        if entry.event is not event:
            result = ToolResult.model_validate(entry.event["result"])
        self._publish(pending, result)

    def _settle(self, pending: _Pending, decision: Decision) -> None:
        """Commit what the skill runner decided for a call (its answer included)."""
        self.policy.apply(pending.proposal.lane, decision)
        result = decision.result or ToolResult.ok(f"{pending.proposal.tool} done")
        self._publish(pending, result)

    def _publish(self, pending: _Pending, result: ToolResult) -> None:
        proposal = pending.proposal
        self._results[proposal.call_id] = result
        self._inflight.pop(proposal.call_id, None)
        if not pending.result.done():
            pending.result.set_result(result)
        if not pending.admitted.done():
            pending.admitted.set_result(None)

    def _fold_committed_results(self) -> None:
        """Rebuild the idempotency table and open approvals from a restored log."""
        for entry in self.log:
            event = entry.event
            if entry.kind == "tool_result_committed":
                result = ToolResult.model_validate(event["result"])
                self._results[str(event["call_id"])] = result
                if str(event["tool"]).startswith(META_PREFIX) and "approval_id" in result.data:
                    self._approvals[str(result.data["approval_id"])] = entry.lane
            elif entry.kind == "approval_resolved":
                self._approvals.pop(str(event["approval_id"]), None)


__all__ = ["Arbiter", "Gate"]
