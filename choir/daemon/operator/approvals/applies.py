"""Applies that must not fail silently (issue 19, recovery inbox): `agent update` recorded.

An update stops an agent and starts it again on a new build; if it fails half-way — or choird
dies during it — the agent may be left stopped with its session suspended, and nobody may be
watching the stream that said so. So each update is recorded before it runs
(`choir.store.recovery_items`, `running`), forgotten when it succeeds (an earlier failure of
the same agent's update is then decided by it), and kept as a failure with its reason when it
fails. A record choird could not write fails the update itself: an apply is never unrecorded.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from choir.daemon.operator.context import OperatorContext
from choir.errors import ChoirError, one_line
from choir.logs import get_logger
from choir.store.recovery_items import apply_failed, apply_succeeded, begin_apply

log = get_logger("choird.operator")

UPDATE = "agent.update"
"""The `subject` of a recorded agent update."""


@asynccontextmanager
async def recorded_update(ctx: OperatorContext, agent_id: str) -> AsyncIterator[None]:
    """Record the agent's update around the block: a failure (a `ChoirError`) stays listed in
    the recovery inbox; a choird killed during the block leaves it `running` for the next one."""
    item_id = f"apply-{secrets.token_hex(6)}"
    async with ctx.pool.acquire() as conn:
        await begin_apply(conn, item_id, UPDATE, agent_id, ctx.clock())
    try:
        yield
    except ChoirError as error:
        async with ctx.pool.acquire() as conn:
            await apply_failed(conn, item_id, one_line(error.message))
        log.warning(
            "agent update failed: listed in the recovery inbox",
            fields={"agent_id": agent_id, "item_id": item_id},
        )
        raise
    async with ctx.pool.acquire() as conn:
        await apply_succeeded(conn, item_id, UPDATE, agent_id, ctx.clock())
