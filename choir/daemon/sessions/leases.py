"""Leasing a session's exclusive resources all-or-nothing, with refusals that name the holder.

The agent's own id is leased with its resources (kind `agent`), so the singleton rule
(invariant 11) rides on the same primary key as every other lease and two concurrent starts of
one agent cannot both succeed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from choir.daemon.sessions.bindings import AGENT_KIND, KIND_NOUNS
from choir.errors import ConflictError
from choir.store.leases import Lease, Resource, acquire
from choir.store.postgres.pool import Connection


async def lease_all(
    conn: Connection,
    resources: Sequence[Resource],
    *,
    agent_id: str,
    session_id: str,
    now: datetime,
) -> None:
    """Lease every resource to the session or raise `ConflictError` naming each holder.

    On conflict nothing is leased; the caller's transaction should roll back its other writes.
    """
    held = await acquire(conn, resources, agent_id=agent_id, session_id=session_id, now=now)
    if held:
        raise ConflictError(conflict_message(agent_id, held))


def conflict_message(agent_id: str, held: Sequence[Lease]) -> str:
    """One line: the agent already running, else every resource and who holds it."""
    for lease in held:
        if lease.resource.kind == AGENT_KIND:
            return already_running(agent_id, lease.session_id).message
    return "; ".join(_held_by(lease) for lease in held)


def already_running(agent_id: str, session_id: str) -> ConflictError:
    """The refusal of a second instance of an agent (invariant 11)."""
    return ConflictError(
        f"{agent_id} is already running (session {session_id}): "
        f"stop it first with choirctl agent stop {agent_id}"
    )


def _held_by(lease: Lease) -> str:
    kind, name = lease.resource
    flag = "--" + kind.replace("_", "-")
    return (
        f"{KIND_NOUNS.get(kind, kind)} {name!r} is leased to {lease.agent_id} "
        f"(session {lease.session_id}): stop {lease.agent_id} or pass {flag}"
    )
