"""`memory.about` and `memory.forget`: the operator curates what an agent learnt from a user.

`about` lists the items an agent's sessions with a user wrote (their provenance names the
session's DM); the user is a DM's name or its user id on its gateway. Editing is the knowledge
writes (`knowledge write`, recorded as the operator's). `forget` removes an item from every
memory store and index in one transaction, records who forgot it and when in the agent's
`knowledge_forgotten`, and says so in choird's log (`choir.store.knowledge.forget`).
"""

from __future__ import annotations

from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.memory.access import listed
from choir.daemon.operator.memory.views import knowledge_view, store_of
from choir.daemon.operator.views import iso
from choir.logs import get_logger
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r

log = get_logger("choird.operator")


async def memory_about(ctx: OperatorContext, request: r.MemoryAbout) -> a.MemoryAbout:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    user = dm_of(ctx, request.user)
    items = await store.knowledge_about(request.agent_id, user, limit=request.limit)
    return a.MemoryAbout(
        agent_id=request.agent_id,
        user=user,
        items=[knowledge_view(request.agent_id, listed(ctx, request.agent_id, i)) for i in items],
    )


async def memory_forget(ctx: OperatorContext, request: r.MemoryForget) -> a.MemoryForgotten:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    gone = await store.forget_knowledge(request.agent_id, request.ref, by=request.by)
    log.info(
        "knowledge item forgotten",
        fields={
            "agent_id": request.agent_id,
            "item_id": str(gone.id),
            "versions": gone.versions,
            "by": request.by,
        },
    )
    return a.MemoryForgotten(
        agent_id=request.agent_id,
        ref=request.ref,
        id=str(gone.id),
        versions=gone.versions,
        by=request.by,
        forgotten_at=iso(gone.forgotten_at),
    )


def dm_of(ctx: OperatorContext, user: str) -> str:
    """The DM name `user` is, or whose gateway user id it is; else `user` as given (a DM since
    removed from config.json still names what was learnt from it)."""
    dms = ctx.config.dms
    if user in dms:
        return user
    matches = sorted(name for name, dm in dms.items() if dm.user_id == user)
    return matches[0] if matches else user
