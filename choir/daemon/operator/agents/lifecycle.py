"""`agent.start`, `agent.stop`, `agent.restart` (§17.1, §17.2), `shutdown` and
`choird.restart`.

Start prepares what the agent runs first — its image, or its merged `/choir` tree — so a broken
repo refuses before anything is leased; then it starts the session — which leases the agent and
its exclusive resources in one transaction and records the version.json INIT_HELLO must match —
then opens the agent's socket and runs it. If any step after the session fails, the session is
ended again, so a failed start never leaves a lease behind; a resumed session ends suspended, so
the next start still resumes it. A resumed session's start answers once the agent runs its lanes,
and fails with the agent's reason if the resume did not work (`resume_watch`).

Restart is stop-then-start of the same session with the same bindings (§17.1), except the
transient `model set`/`voice set` overrides, which revert to the start's choice. Verbs on one
agent run one at a time (a per-agent lock), so a stop cannot overtake a restart half-way.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Final

from choir.config import load_home
from choir.config.scaffolding.home_setup import SCRATCH_DIRS
from choir.daemon.agents.resume_watch import until_resumed
from choir.daemon.memory.keys import checked_key
from choir.daemon.operator.agents.launches import Launched, Lifecycle
from choir.daemon.operator.context import OperatorContext
from choir.daemon.runtimes.base import TERM_GRACE_S, StopReason, graceful_stop
from choir.daemon.sessions.bindings import resolve_bindings
from choir.daemon.sessions.stop_summary import summary_view
from choir.errors import ChoirError, ConfigError, UnavailableError, UsageError
from choir.logs import get_logger
from choir.protocol.operator.answers import (
    AgentRestarted,
    AgentStarted,
    AgentStopped,
    ChoirdRestarting,
    ChoirdShutdown,
    StopSummary,
)
from choir.protocol.operator.requests import AgentRef, AgentStart, NoArguments, StartOverrides
from choir.store.operator_choices import save_start_overrides, start_overrides_of
from choir.store.sessions import SessionRow, SessionStatus

log = get_logger("choird.lifecycle")

TRANSIENT_ROLES: Final = ("llm", "voice_profile")
"""Roles `model set`/`voice set` may have changed in a session; a restart reverts them."""
SHUTDOWN_DELAY_S: Final = 0.05
"""`shutdown` and `choird.restart` answer first, then choird begins stopping."""


async def agent_start(ctx: OperatorContext, request: AgentStart) -> AgentStarted:
    """Start the agent's session and its process; undo the session if the process fails. A
    memory key is checked first (a wrong one refuses the start, nothing written) and held in
    choird's memory from then on (`choir.daemon.memory.keys`); items written in the clear before
    their memory was marked encrypted are sealed with it first (`sealed_backfill`)."""
    async with lifecycle_of(ctx).exclusive(request.agent_id):
        if request.memory_key is None:
            return await launch(ctx, request)
        ctx.require_agent(request.agent_id)
        key = await checked_key(
            ctx.pool,
            request.agent_id,
            ctx.config.agents[request.agent_id],
            request.memory_key.encode("ascii", errors="replace"),
        )
        notes = await _seal_written_before(ctx, request.agent_id, key)
        keys = ctx.services.memory_keys
        held = keys.key(request.agent_id)
        keys.hold(request.agent_id, key)
        try:
            started = await launch(ctx, request.model_copy(update={"memory_key": None}))
            return started.model_copy(update={"memory_sealed": notes})
        except BaseException:
            if held is None:
                keys.forget(request.agent_id)
            raise


async def agent_stop(ctx: OperatorContext, request: AgentRef) -> AgentStopped:
    """Graceful stop (§17.2); answers once the process exited, with the session's end status.
    The agent's memory key is forgotten (a restart keeps it)."""
    async with lifecycle_of(ctx).exclusive(request.agent_id):
        row = await ctx.running_session(request.agent_id, hint="nothing to stop")
        stopped = await stop_session(ctx, row, "stop")
        ctx.services.memory_keys.forget(request.agent_id)
        return stopped


async def agent_restart(ctx: OperatorContext, request: AgentRef) -> AgentRestarted:
    """Stop, then start the same session with the same bindings (§17.1)."""
    lifecycle = lifecycle_of(ctx)
    async with lifecycle.exclusive(request.agent_id):
        row = await ctx.running_session(request.agent_id, hint=None)  # says how to start it
        stopped = await stop_session(ctx, row, "restart")
        started = await relaunch(ctx, row)
        return AgentRestarted(**dict(started), stopped=stopped)


async def choird_shutdown(ctx: OperatorContext, _: NoArguments) -> ChoirdShutdown:
    """Stop choird: it stops every agent it runs gracefully, then exits (`choir down`)."""
    lifecycle = lifecycle_of(ctx)
    if lifecycle.shutdown is None:
        raise UnavailableError("this choird cannot be stopped over its socket: send it SIGTERM")
    running = sum(lifecycle.runtime.running(agent) is not None for agent in ctx.config.agents)
    asyncio.get_running_loop().call_later(SHUTDOWN_DELAY_S, lifecycle.shutdown)
    return ChoirdShutdown(pid=os.getpid(), agents_running=running)


async def choird_restart(ctx: OperatorContext, _: NoArguments) -> ChoirdRestarting:
    """Restart choird in place (`choir restart`): it stops serving, leaves its agents running
    and re-executes itself; the new image adopts them. Refused before anything stops when it
    cannot re-execute itself, or when config.json and secrets.json would not let it start again
    (it would then leave its agents without a choird)."""
    lifecycle = lifecycle_of(ctx)
    restart = lifecycle.restart
    refusal = (
        "it was started without a way to re-execute itself"
        if restart is None
        else restart.refusal()
    )
    if restart is None or refusal is not None:
        raise UnavailableError(
            f"choird cannot restart in place: {refusal}; nothing was stopped "
            "(choir down, then choir up, restarts it and its agents)"
        )
    try:
        await asyncio.to_thread(load_home, ctx.home)
    except ConfigError as error:
        header = "choird not restarted, nothing stopped: it would not start again with this home"
        raise ConfigError(error.problems, header=header) from None
    running = sum(lifecycle.runtime.running(agent) is not None for agent in ctx.config.agents)
    log.info("choird restarting in place", fields={"agents_running": running})
    asyncio.get_running_loop().call_later(SHUTDOWN_DELAY_S, restart.begin)
    return ChoirdRestarting(pid=os.getpid(), agents_running=running)


# -- the steps the verbs share ---------------------------------------------------------------


async def launch(ctx: OperatorContext, request: AgentStart) -> AgentStarted:
    """Start (or resume) the agent's session and spawn it; every lease undone on failure."""
    lifecycle = lifecycle_of(ctx)
    ctx.require_agent(request.agent_id)
    overrides = request.overrides.model_dump()
    bindings = resolve_bindings(ctx.config, request.agent_id, overrides)
    workspace = Path(ctx.config.workspaces[bindings.workspace].path)
    await asyncio.to_thread(_require_directory, bindings.workspace, workspace)
    artefact = await lifecycle.runtime.prepare(request.agent_id, ctx.config)
    version, root = artefact.version, artefact.root
    started = await ctx.sessions.start(
        request.agent_id,
        overrides,
        new_session=request.new_session,
        resume=request.resume,
        image=version,
    )
    try:
        async with ctx.pool.acquire() as conn:  # what `agent restart` reverts to, even after
            await save_start_overrides(conn, request.agent_id, overrides)  # a choird restart
        await asyncio.to_thread(ensure_scratch, workspace)
        socket = await lifecycle.open_socket(request.agent_id)
        agent = await lifecycle.runtime.start(
            request.agent_id, started, artefact, workspace=workspace, socket=socket
        )
        if started.resumed:  # spawned is not resumed: wait for it, or for why it failed
            await until_resumed(
                ctx.sessions,
                ctx.services.status,
                agent_id=request.agent_id,
                session_id=started.session_id,
                dm=started.bindings.dm,
            )
    except BaseException as error:
        status = SessionStatus.SUSPENDED if started.resumed else SessionStatus.STOPPED
        await ctx.sessions.stop(started.session_id, f"the agent did not start: {error}", status)
        raise
    lifecycle.launched[request.agent_id] = Launched(request.overrides, version, root)
    return AgentStarted(
        agent_id=request.agent_id,
        session_id=started.session_id,
        resumed=started.resumed,
        bindings=started.bindings.model_dump(mode="json"),
        runtime=lifecycle.runtime.name,
        sandboxed=lifecycle.runtime.sandboxed,
        pid=agent.pid,
        image=version.model_dump(mode="json"),
    )


async def relaunch(ctx: OperatorContext, row: SessionRow) -> AgentStarted:
    """Start `row`'s stopped session again with its bindings (transient overrides reverted).
    With the agent's memory key held, items written in the clear before their memory was
    marked encrypted (a config change since the keyed start) are sealed first, as a keyed start
    seals them."""
    key = ctx.services.memory_keys.key(row.agent_id)
    try:
        notes = [] if key is None else await _seal_written_before(ctx, row.agent_id, key)
        started = await launch(
            ctx,
            AgentStart(
                agent_id=row.agent_id,
                overrides=await _same_bindings(ctx, row),
                resume=row.session_id,
            ),
        )
        return started.model_copy(update={"memory_sealed": notes})
    except ChoirError as error:
        raise type(error)(
            f"{row.agent_id} stopped but did not start again: {error.message} "
            f"(resume it with choirctl agent start {row.agent_id} --dm "
            f"{row.resource_bindings.get('dm')} --resume {row.session_id})"
        ) from None


async def _seal_written_before(ctx: OperatorContext, agent_id: str, key: bytes) -> list[str]:
    """Seal `agent_id`'s items written before their memory was marked encrypted; the notes
    saying how many, logged too."""
    # only a start with a memory key gets here: the store's knowledge modules load with it
    from choir.daemon.memory.sealed_backfill import seal_written_before, sealed_notes

    counts = await seal_written_before(ctx.pool, agent_id, ctx.config.agents[agent_id], key)
    notes = sealed_notes(agent_id, counts)
    for note in notes:
        log.info(note, fields={"agent_id": agent_id})
    return notes


async def stop_session(ctx: OperatorContext, row: SessionRow, reason: StopReason) -> AgentStopped:
    """Stop the agent running `row` gracefully (§17.2); its session's end status and how its
    session summary went (§11.8)."""
    lifecycle = lifecycle_of(ctx)
    spawned = lifecycle.runtime.running(row.agent_id) is not None
    exit_code = await lifecycle.runtime.stop(row.agent_id, reason)  # None: unknown, or not ours
    if not spawned:
        # a session choird did not spawn (e.g. an agent run by hand): ask it to stop and wait
        plan = graceful_stop(reason, ctx.config)
        ctx.sessions.expect_shutdown(row.session_id, reason)
        ctx.push(row.session_id, plan.push)
        await _until_ended(ctx, row.session_id, plan.grace_s + TERM_GRACE_S)
    ended = await ctx.sessions.get(row.session_id)
    outcome = ctx.sessions.take_summary(row.session_id)
    summary = summary_view(outcome, ended.ack_rev, row.agent_id)
    fields = {"agent_id": row.agent_id, "session_id": row.session_id, "summary": summary["detail"]}
    if summary["warn"]:
        log.warning("agent stopped without a session summary", fields=fields)
    else:
        log.info("agent stopped", fields=fields)
    return AgentStopped(
        agent_id=row.agent_id,
        session_id=row.session_id,
        status=ended.status.value,
        exit_code=exit_code,
        summary=StopSummary.model_validate(summary),
    )


def ensure_scratch(workspace: Path) -> None:
    """`.choirtmp/send` and `.choirtmp/recv`, where files go to and come from the user."""
    for scratch in SCRATCH_DIRS:
        (workspace / scratch).mkdir(parents=True, exist_ok=True)


def _require_directory(name: str, workspace: Path) -> None:
    if not workspace.is_dir():
        raise UsageError(
            f"workspace {name} is missing ({workspace}): "
            "create the directory or bind another with --workspace"
        )


async def _same_bindings(ctx: OperatorContext, row: SessionRow) -> StartOverrides:
    """`row`'s bindings with the transient roles back at the last start's choice — recorded in
    Postgres, so a choird restarted meanwhile reverts to it too, not to the defaults."""
    bound = {role: name for role, name in row.resource_bindings.items() if name}
    launched = lifecycle_of(ctx).launched.get(row.agent_id)
    if launched is not None:
        chosen: dict[str, Any] = launched.overrides.model_dump()
    else:
        async with ctx.pool.acquire() as conn:
            chosen = await start_overrides_of(conn, row.agent_id) or {}
    for role in TRANSIENT_ROLES:
        bound[role] = chosen.get(role)
    return StartOverrides.model_validate(bound)


async def _until_ended(ctx: OperatorContext, session_id: str, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (await ctx.sessions.get(session_id)).status != SessionStatus.ACTIVE:
            return
        await asyncio.sleep(0.05)


def lifecycle_of(ctx: OperatorContext) -> Lifecycle:
    if ctx.lifecycle is None:
        raise UnavailableError(
            "this choird was started without an agent runtime: run choird to start agents"
        )
    return ctx.lifecycle
