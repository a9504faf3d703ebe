"""`knowledge.add|write|rename|alias|history|restore`: named, versioned knowledge for the operator.

Like the rest of the operator's memory verbs (`choir.daemon.operator.memory.views`) they go through
choird's `MemoryStore`, one transaction each under the agent's role: an unknown name is a
`NotFoundError`, a taken name a `ConflictError`, and nothing is written on a refusal. A restore
is a write: the restored text is embedded like any other. A write to an encrypted memory is
sealed with the key choird holds (`knowledge_access.sealed`, `restored`): no vector of it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from choir.core.memory.knowledge.provenance import operator
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.memory.access import (
    listed,
    listed_version,
    placed_content,
    restored,
    sealed,
)
from choir.daemon.operator.memory.graph import fields_of
from choir.daemon.operator.memory.views import (
    knowledge_view,
    provenance_view,
    store_of,
    stored,
    tag_metadata,
)
from choir.daemon.operator.views import iso
from choir.errors import NotFoundError, UsageError
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r

if TYPE_CHECKING:
    from choir.store.knowledge.versions import KnowledgeVersion


async def knowledge_add(ctx: OperatorContext, request: r.KnowledgeAdd) -> a.KnowledgeStored:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    text, fields = await placed_content(ctx, store, request)
    item = await store.add_knowledge(
        request.agent_id,
        text,
        name=request.name,
        metadata=tag_metadata(request.tags),
        fields=fields,
        kind=request.kind,
        provenance=operator(request.by),
    )
    return await stored(ctx, store, request.agent_id, item)


async def knowledge_write(ctx: OperatorContext, request: r.KnowledgeWrite) -> a.KnowledgeStored:
    """Replace the item's content; without tags it keeps its metadata, without text, loc,
    type or data its own."""
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    metadata = tag_metadata(request.tags) or None
    fields = fields_of(request)
    if request.text is None and metadata is None and not fields.given and request.kind is None:
        raise UsageError("give the new text, or tags, loc, type, data or kind to write")
    text = request.text
    if text is not None or fields.data is not None:
        with contextlib.suppress(NotFoundError):  # the write itself says what is missing
            item = await store.get_knowledge(request.agent_id, request.ref)
            text, fields = sealed(ctx, request.agent_id, item.memory_class, text, fields, item)
    written = await store.write_knowledge(
        request.agent_id,
        request.ref,
        text,
        metadata=metadata,
        fields=fields,
        kind=request.kind,
        provenance=operator(request.by),
    )
    return await stored(ctx, store, request.agent_id, written.item)


async def knowledge_rename(ctx: OperatorContext, request: r.KnowledgeRename) -> a.KnowledgeView:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    item = await store.rename_knowledge(request.agent_id, request.ref, request.name)
    return knowledge_view(request.agent_id, item)


async def knowledge_alias(ctx: OperatorContext, request: r.KnowledgeAlias) -> a.KnowledgeView:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    item = await store.alias_knowledge(request.agent_id, request.ref, request.alias)
    return knowledge_view(request.agent_id, item)


async def knowledge_history(
    ctx: OperatorContext, request: r.KnowledgeHistoryRequest
) -> a.KnowledgeHistory:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    item, versions = await store.knowledge_history(
        request.agent_id, request.ref, limit=request.limit
    )
    agent = request.agent_id
    return a.KnowledgeHistory(
        item=knowledge_view(agent, listed(ctx, agent, item)),
        versions=[_version_view(listed_version(ctx, agent, item, v)) for v in versions],
    )


async def knowledge_restore(ctx: OperatorContext, request: r.KnowledgeRestore) -> a.KnowledgeStored:
    store = store_of(ctx)
    ctx.require_agent(request.agent_id)
    stored_as = None
    with contextlib.suppress(NotFoundError):  # the restore itself says what is missing
        item = await store.get_knowledge(request.agent_id, request.ref)
        stored_as = restored(ctx, request.agent_id, item)
    written = await store.restore_knowledge(
        request.agent_id, request.ref, request.version, operator(request.by), stored_as
    )
    return await stored(ctx, store, request.agent_id, written.item)


def _version_view(version: KnowledgeVersion) -> a.KnowledgeVersionView:
    return a.KnowledgeVersionView(
        version=version.version,
        name=version.name,
        text=version.text,
        metadata=version.metadata,
        written_at=iso(version.written_at),
        restored_from=version.restored_from,
        loc=version.loc or None,
        type=version.type,
        data=version.data,
        provenance=provenance_view(version.provenance),
    )
