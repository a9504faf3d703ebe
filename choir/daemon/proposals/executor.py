"""Runs an approved proposal's apply: each step durable in Postgres, side effects at the edges.

The state (`steps.ApplyState`) is saved before a step runs and after it ends, and each step's
start and end is a line of the approval's audit trail, so `choirctl approval show` follows the
apply and a restarted choird resumes it (`resume_all`). The edges (git, the build, the agent's
update) are one object passed in, so the daemon wires the real ones and a fault test can stop the
pipeline between any two steps. The end — `applied`, or `failed` with the step and the reason
after the agent was put back as it was — is handed to `finished`, which tells the agent and the
approvers.

A tool (`TOOL`, §8.10's two-phase registration, `proposals.tool`) stops after its commit at
`implement`: the approval stays `approved` with an outcome saying what a human writes and the
command that registers it, and the agent is told it cannot call the tool yet. `register` picks it
up at `validate` with the human's commit, through the same steps; a register that fails is
undone and waits at `implement` again (the approval stays `approved`, its outcome and audit
trail saying which step failed and why, the approvers' chats told), so the human fixes the
branch and registers again — the agent, never stopped or told, runs as it did.

A repo change (`REPO_CHANGE`) was committed by the agent and fetched at proposal time: its
`commit` step only checks that the fetched branch is still what was reviewed (`fetched`).

A config change (`CONFIG_CHANGE`) is not a git apply: `config` (choird's `config load` +
`config apply`) applies it in one go, noting its steps on the audit trail; its end is told the
same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import asdict, replace
from typing import Literal, Protocol

from choir.daemon.proposals import tool
from choir.daemon.proposals.git_apply import ApplyError
from choir.daemon.proposals.repo_change import REPO_CHANGE
from choir.daemon.proposals.repo_change import slug_of as repo_slug
from choir.daemon.proposals.skill import ProposedFile, skill_file
from choir.daemon.proposals.steps import (
    APPLIED_KINDS,
    CONFIG_CHANGE,
    ORDER,
    TOOL,
    TOOL_ORDER,
    ApplyState,
    Effect,
    Outcome,
    Redeploy,
    RevertMerge,
    Step,
    StepDone,
    StepFailed,
    advance,
    registered,
    resume,
    start,
    undo,
    undone,
)
from choir.daemon.sessions.state import Clock, utc_now
from choir.errors import ChoirError, ConflictError, one_line
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.store.approvals.applies import get_apply, open_applies, save_apply
from choir.store.approvals.audit import add_audit
from choir.store.approvals.pending import (
    ApprovalRow,
    finish_approval,
    get_approval,
    list_approvals,
    note_outcome,
)
from choir.store.postgres.pool import Pool

log = get_logger("choird.proposals")

ACTOR = "choird"


class ApplyEdges(Protocol):
    """The side effects of an apply, one method per step (each idempotent)."""

    def known_tools(self, agent_id: str) -> Collection[str]: ...
    async def commit(
        self, state: ApplyState, file: ProposedFile, *more: ProposedFile
    ) -> dict[str, str]: ...
    async def validate(self, state: ApplyState) -> dict[str, str]: ...
    async def fetched(self, state: ApplyState, sha256: str | None) -> dict[str, str]: ...
    async def ref_head(self, state: ApplyState) -> str: ...
    async def merge(self, state: ApplyState) -> dict[str, str]: ...
    async def build(self, state: ApplyState) -> dict[str, str]: ...
    async def update(self, state: ApplyState) -> dict[str, str]: ...
    async def revert(self, state: ApplyState) -> None: ...
    async def redeploy(self, state: ApplyState) -> None: ...


Finished = Callable[[ApprovalRow, ApplyState | None], None]
"""Told how an apply ended (a config change has no `ApplyState`)."""
Progress = Callable[[str, str], None]
"""Told each step an apply finished or undid: (approval id, one line) — the DMs' progress."""
Note = Callable[[str, str], Awaitable[None]]
"""(audit action, detail): a line of the approval's audit trail."""
ConfigApply = Callable[[ApprovalRow, Note], Awaitable[str]]
"""Applies an approved config change; what it applied, or `ChoirError` with why not."""


def branch_of(row: ApprovalRow, slug: str) -> str:
    return f"proposal/{row.session_id or 'none'}/{slug}"


class ProposalApplier:
    """Applies approved proposals, one task each; `resume_all` picks up a previous choird's."""

    def __init__(
        self,
        pool: Pool,
        edges: ApplyEdges,
        finished: Finished,
        *,
        clock: Clock = utc_now,
        config: ConfigApply | None = None,
        progress: Progress | None = None,
    ) -> None:
        self._pool = pool
        self._config = config
        self._edges = edges
        self._finished = finished
        self._progress = progress
        self._clock = clock
        self._tasks: dict[str, asyncio.Task[ApplyState]] = {}

    def begin(self, row: ApprovalRow) -> asyncio.Task[ApplyState] | None:
        """Start applying `row` (approved, of an applied kind); None for other kinds."""
        if row.request_type not in APPLIED_KINDS or row.status != "approved":
            return None
        running = self._tasks.get(row.id)
        if running is not None:
            return running
        task = asyncio.create_task(self.run(row.id), name=f"apply-{row.id}")
        self._tasks[row.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(row.id, None))
        return task

    async def resume_all(self) -> list[asyncio.Task[ApplyState]]:
        """Resume every apply a previous choird left unfinished (and approvals it approved but
        never began applying)."""
        async with self._pool.acquire() as conn:
            ids = [str(fields["approval_id"]) for fields in await open_applies(conn)]
            for row in await list_approvals(conn, status="approved"):
                if row.request_type in APPLIED_KINDS and row.id not in ids:
                    ids.append(row.id)
        if ids:
            log.info("resuming applies choird left unfinished", fields={"approvals": ids})
        tasks = []
        for approval_id in ids:
            task = asyncio.create_task(self.run(approval_id), name=f"apply-{approval_id}")
            self._tasks[approval_id] = task
            tasks.append(task)
        return tasks

    async def close(self) -> None:
        """Stop the running applies where they are; the next choird resumes them."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self, approval_id: str) -> ApplyState:
        """Apply approval `approval_id` from wherever it is to its end."""
        async with self._pool.acquire() as conn:
            found = await get_approval(conn, approval_id)
        if found is not None and found.request_type == CONFIG_CHANGE:
            await self._run_config(found)
            return start(found.id, found.agent_id, "")  # no steps: the end is the row's status
        row, state = await self._load(approval_id)
        order = TOOL_ORDER if row.request_type == TOOL else ORDER
        if state.undo_pending:  # a previous choird was killed while undoing a failure
            await self._note(state, "step", "rollback: resumed after a restart", told=True)
            state = await self._rollback(state, undo(state))
        while (step := resume(state)) is not None:
            await self._note(state, "step", f"{step}: started")
            outcome = await self._attempt(row, state, step)
            state, effects = advance(state, outcome, order)
            await self._save(state)
            if isinstance(outcome, StepFailed):
                action = "register_failed" if state.step == "implement" else "failed"
                await self._note(state, action, f"{state.failed_step}: {state.reason}", told=True)
                state = await self._rollback(state, effects)
            else:
                await self._note(state, "step", f"{step}: done{_facts(outcome)}", told=True)
                await failpoint(f"proposal.after_{step}")
        if state.step == "implement" and state.failed_step is not None:
            return await self._register_failed(row, state)
        if state.step == "implement":
            return await self._awaiting(row, state)
        return await self._end(row, state)

    async def register(self, approval_id: str, commit: str) -> ApplyState:
        """Phase 2 of a tool waiting at `implement`: the human's `commit` (checked by the
        caller) validated, merged, built and deployed; the state it ended in. The apply goes on
        if the caller goes away, and a restarted choird resumes it."""
        row, state = await self._load(approval_id)
        if row.request_type != TOOL or state.step != "implement":
            raise ConflictError(
                f"approval {approval_id} is not a tool awaiting its implementation "
                f"(its apply is at {state.step}): see `choirctl approval show {approval_id}`"
            )
        if approval_id in self._tasks:
            raise ConflictError(f"approval {approval_id} is being applied already")
        state = registered(state, commit)
        await self._save(state)
        await self._note(state, "register", f"commit {commit} of {state.branch}")
        task = asyncio.create_task(self.run(approval_id), name=f"apply-{approval_id}")
        self._tasks[approval_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(approval_id, None))
        return await asyncio.shield(task)

    async def _awaiting(self, row: ApprovalRow, state: ApplyState) -> ApplyState:
        """A tool's phase 1 ended: say (once) what a human writes, and tell the agent."""
        if row.outcome is not None:
            return state  # said already (a restarted choird)
        proposed = tool.proposed_tool(row.payload)
        text = tool.awaiting_text(row.agent_id, state.branch, proposed)
        async with self._pool.acquire() as conn:
            noted = await note_outcome(conn, row.id, text)
        await self._note(state, "awaiting", "implementation: a human writes the tool")
        if noted is not None:
            self._finished(noted, state)
        return state

    async def _register_failed(self, row: ApprovalRow, state: ApplyState) -> ApplyState:
        """A register failed and was undone: the approval waits for an implementation again,
        its outcome saying why (once: a restarted choird finds it said)."""
        assert state.failed_step is not None
        text = tool.register_failed_text(
            row.agent_id, state.branch, state.failed_step, state.reason or ""
        )
        if row.outcome == text:
            return state
        async with self._pool.acquire() as conn:
            await note_outcome(conn, row.id, text)
        await self._note(state, "awaiting", f"implementation again: {text}", told=True)
        return state

    async def _run_config(self, row: ApprovalRow) -> None:
        async def note(action: str, detail: str) -> None:
            log.info("apply", fields={"approval_id": row.id, "detail": detail})
            async with self._pool.acquire() as conn:
                await add_audit(
                    conn, row.id, action, at=self._clock(), actor=ACTOR, via=ACTOR, detail=detail
                )

        status: Literal["applied", "failed"] = "failed"
        try:
            if self._config is None:
                raise ApplyError("this choird cannot apply config changes")
            detail = await self._config(row, note)
            status = "applied"
        except asyncio.CancelledError:
            raise
        except ChoirError as error:
            detail = one_line(error.message)
        except Exception as error:  # a bug fails the apply, never choird
            log.exception("config apply failed", fields={"approval_id": row.id})
            detail = f"{type(error).__name__}: {error}"
        if status == "failed":
            detail = f"config apply failed: {detail}; config.json and the running config unchanged"
            await note("failed", detail)
        async with self._pool.acquire() as conn:
            ended = await finish_approval(conn, row.id, status, detail)
            if ended is not None and status == "applied":
                await add_audit(
                    conn, row.id, "applied", at=self._clock(), actor=ACTOR, via=ACTOR, detail=detail
                )
        if ended is not None:
            self._finished(ended, None)

    async def _load(self, approval_id: str) -> tuple[ApprovalRow, ApplyState]:
        async with self._pool.acquire() as conn:
            row = await get_approval(conn, approval_id)
            if row is None:
                raise ApplyError(f"no approval {approval_id}")
            stored = await get_apply(conn, approval_id)
            state = None if stored is None else ApplyState(**stored)
            if state is None:
                slug = str((row.payload.get("spec") or {}).get("name") or "proposal")
                if row.request_type == TOOL:
                    slug = tool.tool_name(row.payload)
                elif row.request_type == REPO_CHANGE:  # the branch choird fetched it into
                    slug = repo_slug(row.payload)
                state = start(row.id, row.agent_id, branch_of(row, slug))
                await save_apply(conn, asdict(state), now=self._clock())
        return row, state

    async def _attempt(self, row: ApprovalRow, state: ApplyState, step: Step) -> Outcome:
        try:
            return StepDone(step, await self._step(row, state, step))
        except asyncio.CancelledError:
            raise
        except ChoirError as error:
            return StepFailed(step, one_line(error.message))
        except Exception as error:  # a bug in a step fails the apply, never choird
            log.exception("apply step failed", fields={"approval_id": row.id, "step": step})
            return StepFailed(step, f"{type(error).__name__}: {error}")

    async def _step(self, row: ApprovalRow, state: ApplyState, step: Step) -> dict[str, str]:
        edges = self._edges
        match step:
            case "commit":
                if row.request_type == REPO_CHANGE:  # committed by the agent: check it only
                    return await edges.fetched(state, row.content_sha256)
                first, *more = self._reviewed(row, state)
                return await edges.commit(state, first, *more)
            case "validate":
                return await edges.validate(state)
            case "merge":
                if state.merged_from is None:  # durable before the ref moves: undo needs it
                    state = replace(state, merged_from=await edges.ref_head(state))
                    await self._save(state)
                return {"merged_from": str(state.merged_from), **await edges.merge(state)}
            case "build":
                return await edges.build(state)
            case "update":
                return await edges.update(state)
        raise ApplyError(f"no step {step}")

    def _reviewed(self, row: ApprovalRow, state: ApplyState) -> list[ProposedFile]:
        """The files to commit, refused unless they hash as what the approver reviewed (a
        tool: its manifest; the stub beside it is choird's)."""
        extra: list[ProposedFile] = []
        if row.request_type == TOOL:
            proposed = tool.proposed_tool(row.payload)
            file = proposed.manifest
            intended = str(row.payload.get("intended_behavior", ""))
            extra.append(proposed.stub(row.agent_id, state.branch, intended))
        else:
            file = skill_file(row.payload, self._edges.known_tools(row.agent_id))
        if row.content_sha256 is None or file.sha256 != row.content_sha256:
            raise ApplyError(
                "the content to apply differs from what was reviewed (sha256 "
                f"{file.sha256[:12]} ≠ {str(row.content_sha256)[:12]}): nothing applied"
            )
        return [file, *extra]

    async def _rollback(self, state: ApplyState, effects: list[Effect]) -> ApplyState:
        """Run a failure's undo, then record it done (a failed effect is noted, not retried:
        the operator is told and the agent is what `agent status` shows)."""
        for effect in effects:
            try:
                if isinstance(effect, RevertMerge):
                    await self._edges.revert(state)
                    await self._note(
                        state,
                        "step",
                        f"rollback: merge reverted to {state.merged_from}",
                        told=True,
                    )
                elif isinstance(effect, Redeploy):
                    await self._edges.redeploy(state)
                    await self._note(
                        state, "step", "rollback: agent redeployed on its old build", told=True
                    )
            except ChoirError as error:
                await self._note(
                    state, "step", f"rollback failed: {one_line(error.message)}", told=True
                )
        if not state.undo_pending:
            return state
        state = undone(state)
        await self._save(state)
        return state

    async def _end(self, row: ApprovalRow, state: ApplyState) -> ApplyState:
        status: Literal["applied", "failed"] = "applied" if state.step == "done" else "failed"
        detail = (
            f"commit {state.commit_id} on {state.branch}, image {state.image_id}"
            if status == "applied"
            else f"{state.failed_step} failed: {state.reason}; the agent runs as it did"
        )
        async with self._pool.acquire() as conn:
            ended = await finish_approval(conn, row.id, status, detail)
            if ended is not None and status == "applied":
                await add_audit(
                    conn, row.id, "applied", at=self._clock(), actor=ACTOR, via=ACTOR, detail=detail
                )
        if ended is not None:
            self._finished(ended, state)
        return state

    async def _save(self, state: ApplyState) -> None:
        async with self._pool.acquire() as conn:
            await save_apply(conn, asdict(state), now=self._clock())

    async def _note(
        self, state: ApplyState, action: str, detail: str, *, told: bool = False
    ) -> None:
        """A line of the audit trail; `told`: the approvers' chats get it as progress too."""
        log.info("apply", fields={"approval_id": state.approval_id, "detail": detail})
        if told and self._progress is not None:
            self._progress(state.approval_id, detail)
        async with self._pool.acquire() as conn:
            await add_audit(
                conn,
                state.approval_id,
                action,
                at=self._clock(),
                actor=ACTOR,
                via=ACTOR,
                detail=detail,
            )


def _facts(outcome: Outcome) -> str:
    facts = outcome.facts if isinstance(outcome, StepDone) else {}
    shown = ", ".join(f"{key} {value[:12]}" for key, value in facts.items() if value)
    return f" ({shown})" if shown else ""
