"""`knowledge.link|unlink`, and the graph fields and filters of the other knowledge verbs (seed
design 003): the operator's side of loc, type, tags, data and typed edges.

Each write is one transaction under the agent's role (`MemoryStore`): an edge to an item that
does not exist is a `NotFoundError` naming it, a bad loc, type, tag, edge type or data object a
`UsageError` (exit 2), and nothing is written on a refusal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from choir.core.memory.access import MemoryClass
from choir.core.memory.knowledge.graph import (
    EdgeType,
    GraphFilter,
    ItemFields,
    MemoryScope,
    check_data,
    check_edge_type,
    check_loc,
    check_tags,
    check_type,
)
from choir.daemon.operator.context import OperatorContext
from choir.errors import UnavailableError, UsageError
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r

if TYPE_CHECKING:
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.graph import Edge


async def knowledge_link(ctx: OperatorContext, request: r.KnowledgeLink) -> a.KnowledgeLinked:
    store = _store(ctx)
    ctx.require_agent(request.agent_id)
    kind = check_edge_type(request.edge)
    source, target, new = await store.link_knowledge(
        request.agent_id, request.ref, request.target, kind
    )
    return a.KnowledgeLinked(
        agent_id=request.agent_id, source=source.name, target=target.name, edge=kind, new=new
    )


async def knowledge_unlink(ctx: OperatorContext, request: r.KnowledgeUnlink) -> a.KnowledgeUnlinked:
    store = _store(ctx)
    ctx.require_agent(request.agent_id)
    kind: EdgeType | None = None if request.edge is None else check_edge_type(request.edge)
    removed = await store.unlink_knowledge(request.agent_id, request.ref, request.target, kind)
    return a.KnowledgeUnlinked(
        agent_id=request.agent_id, source=request.ref, target=request.target, removed=removed
    )


def fields_of(request: r.KnowledgeAdd | r.KnowledgePut | r.KnowledgeWrite) -> ItemFields:
    """The loc, type and data a write sets, checked (None: unchanged)."""
    return ItemFields(
        loc=None if request.loc is None else check_loc(request.loc),
        type=None if request.type is None else check_type(request.type),
        data=None if request.data is None else check_data(request.data),
    )


def filter_of(request: r.KnowledgeList | r.MemorySearch) -> GraphFilter:
    """The loc, type and tags a listing or a search keeps, checked."""
    if request.loc == "":
        raise UsageError("--loc needs a location like projects:choir (every item: leave it out)")
    return GraphFilter(
        loc=None if request.loc is None else check_loc(request.loc),
        type=None if request.type is None else check_type(request.type),
        tags=check_tags(request.tags),
        scope=_memory_scope(request.memory, request.user),
    )


def _memory_scope(memory: str | None, user: str | None) -> MemoryScope | None:
    """The operator's `--memory`/`--user` filter: one memory (personal: every user's items,
    or `user`'s); `--user` alone keeps that user's personal items. None: every memory."""
    if memory is None and user is None:
        return None
    try:
        memory_class = MemoryClass(memory or MemoryClass.PERSONAL)
    except ValueError:
        raise UsageError(
            f"unknown memory {memory!r}: use " + ", ".join(c.value for c in MemoryClass)
        ) from None
    if user is not None and memory_class is not MemoryClass.PERSONAL:
        raise UsageError("--user keeps a user's personal items: drop --memory or make it personal")
    if user == "":
        raise UsageError("--user needs a DM name (every user's items: leave it out)")
    return MemoryScope((memory_class.value,), user, every_user=user is None)


def edge_view(edge: Edge) -> a.KnowledgeEdgeView:
    return a.KnowledgeEdgeView(
        edge=edge.type, direction=edge.direction, name=edge.other_name, id=str(edge.other_id)
    )


def placed(loc: str, kind: str, tags: tuple[str, ...]) -> dict[str, Any]:
    """A view's loc (None when it has none), type and tags."""
    return {"loc": loc or None, "type": kind, "tags": list(tags)}


def _store(ctx: OperatorContext) -> MemoryStore:
    """choird's memory store (as `memory.store_of`, which imports this module)."""
    store = ctx.memory_store()
    if store is None:
        raise UnavailableError("this choird serves no memory store: restart choird (choir restart)")
    return store
