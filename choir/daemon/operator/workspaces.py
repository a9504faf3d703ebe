"""`workspace.list` and `workspace.reset` (§15.4, §17.1 Workspace).

A reset deletes what is inside the workspace directory and keeps the directory (it is a mount
point). If an agent holds the workspace's lease, it is stopped first (§15.4), gracefully, as
`agent stop` would; a choird without an agent runtime refuses instead. The lease table stays
locked against new leases (SHARE mode blocks the INSERT of an agent start) until the deletion
is over, so no agent can start on a workspace that is being emptied. Deletion never follows a
symlink: a link is removed, not its target; and a workspace path that config check would refuse
(a system directory, `$CHOIR_HOME`, the Docker socket's — say a link swapped in since the config
was loaded) is never emptied. Afterwards the workspace looks as `choirctl init`
made it: empty but for `.choirtmp/send` and `.choirtmp/recv`, where choird stages files for and
from the agent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from choir.config.scaffolding.home_setup import SCRATCH_DIRS
from choir.config.validation.workspace_paths import dangerous_workspaces
from choir.daemon.operator.agents.lifecycle import stop_session
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.views import iso
from choir.errors import ChoirError, ConfigError, ConflictError, NotFoundError
from choir.protocol.operator.answers import (
    AgentStopped,
    WorkspaceList,
    WorkspaceReset,
    WorkspaceView,
)
from choir.protocol.operator.requests import NoArguments, WorkspaceRef
from choir.store.leases import Lease, all_leases
from choir.store.postgres.pool import Connection
from choir.store.sessions import SessionStatus

WORKSPACE_KIND = "workspace"


async def workspace_list(ctx: OperatorContext, _: NoArguments) -> WorkspaceList:
    """Every configured workspace: path, whether it exists, who holds its lease."""
    async with ctx.pool.acquire() as conn:
        holders = await _holders(conn)
    workspaces = sorted(ctx.config.workspaces.items())
    existing = await asyncio.to_thread(_directories, [ws.path for _, ws in workspaces])
    rows = []
    for name, workspace in workspaces:
        lease = holders.get(name)
        rows.append(
            WorkspaceView(
                name=name,
                path=workspace.path,
                exists=workspace.path in existing,
                leased_to=lease.agent_id if lease else None,
                session_id=lease.session_id if lease else None,
                leased_at=iso(lease.acquired_at) if lease else None,
            )
        )
    return WorkspaceList(workspaces=rows)


async def workspace_reset(ctx: OperatorContext, request: WorkspaceRef) -> WorkspaceReset:
    """Empty the workspace directory unless an agent holds it; returns how much was removed."""
    workspace = ctx.config.workspaces.get(request.name)
    if workspace is None:
        known = ", ".join(sorted(ctx.config.workspaces)) or "none configured"
        raise NotFoundError(
            f"no workspace named {request.name!r} (known: {known}); see choirctl workspace list"
        )
    refused = await asyncio.to_thread(
        dangerous_workspaces, {request.name: workspace.path}, str(ctx.home.root)
    )
    if refused:  # config check refuses these already; the path may have become a link since
        raise ConfigError(refused, header="workspace reset refused: it would empty a host tree")
    stopped = await _stop_holder(ctx, request.name)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE choir_control.leases IN SHARE MODE")
        lease = (await _holders(conn)).get(request.name)
        if lease is not None:
            raise ConflictError(
                f"workspace {request.name} is leased to {lease.agent_id} (session "
                f"{lease.session_id}): the agent must be stopped first "
                f"(choirctl agent stop {lease.agent_id}), then reset"
            )
        removed = await asyncio.to_thread(clear_directory, Path(workspace.path))
    if stopped is None:
        return WorkspaceReset(name=request.name, path=workspace.path, removed=removed)
    return WorkspaceReset(name=request.name, path=workspace.path, removed=removed, stopped=stopped)


async def _stop_holder(ctx: OperatorContext, name: str) -> AgentStopped | None:
    """Stop the agent leasing workspace `name` gracefully; what `agent stop` would answer.

    None when nobody holds it, or when this choird runs no agents (the reset then refuses)."""
    async with ctx.pool.acquire() as conn:
        lease = (await _holders(conn)).get(name)
    if lease is None or ctx.lifecycle is None:
        return None
    async with ctx.lifecycle.exclusive(lease.agent_id):
        row = await ctx.sessions.get(lease.session_id)
        if row.status != SessionStatus.ACTIVE:
            return None
        return await stop_session(ctx, row, "workspace_reset")


def _directories(paths: list[str]) -> set[str]:
    return {path for path in paths if Path(path).is_dir()}


async def _holders(conn: Connection) -> dict[str, Lease]:
    return {
        lease.resource.name: lease
        for lease in await all_leases(conn)
        if lease.resource.kind == WORKSPACE_KIND
    }


def clear_directory(root: Path) -> int:
    """Delete every entry inside `root` (created if missing), then recreate the scratch
    directories; returns the count of top-level entries removed. Symlinks are unlinked, never
    followed (`rmtree` works on file descriptors and does not descend into links)."""
    if root.exists() and not root.is_dir():
        raise ConflictError(f"workspace path {root} is not a directory: fix config.json")
    root.mkdir(parents=True, exist_ok=True)
    removed = 0
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed += 1
    except OSError as error:
        where = error.filename or root
        raise ChoirError(
            f"workspace reset stopped at {where}: {error.strerror or error}; "
            "fix its permissions and run the reset again"
        ) from None
    for scratch in SCRATCH_DIRS:
        (root / scratch).mkdir(parents=True, exist_ok=True)
    return removed
