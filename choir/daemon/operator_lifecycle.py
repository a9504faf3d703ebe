"""`agent.start` and `agent.stop` (§17.1, §17.2) on the process runtime.

Start merges the agent's tree first (a broken repo refuses before anything is leased), then
starts the session — which leases the agent and its exclusive resources in one transaction and
records the tree's version.json as the image INIT_HELLO must match — then opens the agent's
socket and spawns it. If any step after the session fails, the session is stopped again, so a
failed start never leaves a lease behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from choir.daemon.operator_context import OperatorContext
from choir.daemon.operator_payloads import AgentRef
from choir.daemon.runtime_process import ProcessRuntime
from choir.errors import UnavailableError
from choir.protocol import ShutdownPush, WireModel

OpenSocket = Callable[[str], Awaitable[Path]]
"""The daemon's `open_agent_socket`: the agent's own socket, listening."""


class StartOverrides(WireModel):
    """Start-time bindings replacing the agent's defaults (§17.1 start flags); None keeps it."""

    workspace: str | None = None
    llm: str | None = None
    voice_profile: str | None = None
    git_identity: str | None = None
    notion: str | None = None
    email: str | None = None
    dm: str | None = None
    """Required from choirctl (it has no DM of its own); the gateway's /start passes its own."""


class AgentStart(WireModel):
    agent_id: str
    overrides: StartOverrides = StartOverrides()
    new_session: bool = False
    """Start a fresh session even when the previous one could be resumed."""
    resume: str | None = None
    """Resume this session instead of choosing one."""


@dataclass(frozen=True)
class Lifecycle:
    """What the lifecycle verbs need beyond the context: the runtime and the agent sockets."""

    runtime: ProcessRuntime
    open_socket: OpenSocket


async def agent_start(ctx: OperatorContext, request: AgentStart) -> dict[str, Any]:
    """Start the agent's session and its process; undo the session if the process fails."""
    lifecycle = _lifecycle(ctx)
    ctx.require_agent(request.agent_id)
    root, version = await asyncio.to_thread(
        lifecycle.runtime.materialize, request.agent_id, ctx.config
    )
    started = await ctx.sessions.start(
        request.agent_id,
        request.overrides.model_dump(),
        new_session=request.new_session,
        resume=request.resume,
        image=version,
    )
    try:
        socket = await lifecycle.open_socket(request.agent_id)
        workspace = Path(ctx.config.workspaces[started.bindings.workspace].path)
        agent = await lifecycle.runtime.start(
            request.agent_id, started, root=root, workspace=workspace, socket=socket
        )
    except BaseException as error:
        await ctx.sessions.stop(started.session_id, f"the agent did not start: {error}")
        raise
    return {
        "agent_id": request.agent_id,
        "session_id": started.session_id,
        "resumed": started.resumed,
        "bindings": started.bindings.model_dump(mode="json"),
        "runtime": lifecycle.runtime.name,
        "sandboxed": lifecycle.runtime.sandboxed,
        "pid": agent.pid,
    }


async def agent_stop(ctx: OperatorContext, request: AgentRef) -> dict[str, Any]:
    """Graceful stop (§17.2); answers once the process exited, with the session's end status."""
    lifecycle = _lifecycle(ctx)
    row = await ctx.running_session(request.agent_id, hint="nothing to stop")
    exit_code = await lifecycle.runtime.stop(request.agent_id)
    if exit_code is None:
        # a session choird did not spawn (e.g. left by an agent run by hand): ask it to stop
        ctx.sessions.expect_shutdown(row.session_id, "stop")
        ctx.push(row.session_id, ShutdownPush(reason="stop"))
    ended = await ctx.sessions.get(row.session_id)
    return {
        "agent_id": request.agent_id,
        "session_id": row.session_id,
        "status": ended.status.value,
        "exit_code": exit_code,
    }


def _lifecycle(ctx: OperatorContext) -> Lifecycle:
    if ctx.lifecycle is None:
        raise UnavailableError(
            "this choird was started without an agent runtime: run choird to start agents"
        )
    return ctx.lifecycle
