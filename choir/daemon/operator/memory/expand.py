"""`knowledge.expand`: the operator's one step down the summary tree (seed design 004).

The agent's `choir.memory.query` mode `expand` step (`choir.daemon.memory.tools.tree.expansion`)
for the operator, who sees every user's items and sessions (`EVERYONE`, no graph filter): a
roll-up to the session summaries it covers, a session summary to its archives and tool leaf, a
leaf to the session events in its rev range, a page at a time, each passed through choird's
redaction as `session.messages` shows them. An encrypted item is shown as the list views show
it (`listed`: opened while choird holds the key). An item outside the tree is refused, naming
what can be expanded; nothing is written either way.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from choir.core.memory.access import EVERYONE, Viewer
from choir.core.memory.knowledge.graph import NO_FILTER
from choir.core.memory.summaries.archives import ARCHIVE_KEY
from choir.core.memory.summaries.tree import ROLLUP_KEY, SUMMARY_KEY, TOOLS_KEY
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.memory.access import listed
from choir.daemon.operator.memory.views import knowledge_view, store_of
from choir.errors import NotFoundError, UsageError
from choir.protocol.operator import answers as a
from choir.protocol.operator import requests as r

if TYPE_CHECKING:
    from choir.daemon.memory.tools.browse import BrowsePage
    from choir.store.knowledge.items import KnowledgeItem

LEVELS = (
    (ROLLUP_KEY, "rollup"),
    (SUMMARY_KEY, "summary"),
    (ARCHIVE_KEY, "archive"),
    (TOOLS_KEY, "tools"),
)
"""The metadata key that makes an item a node of the tree, and its level's name."""
EXPANDABLE = (
    "a roll-up (rollup/…), a session summary (summary/…), a compaction archive (archive/…) "
    "or a tool leaf (tools/…)"
)


async def knowledge_expand(
    ctx: OperatorContext, request: r.KnowledgeExpand
) -> a.KnowledgeExpansion:
    from choir.daemon.memory.tools.tree import expansion

    store = store_of(ctx)
    agent = request.agent_id
    ctx.require_agent(agent)
    try:
        item = await store.get_knowledge(agent, request.ref)
    except NotFoundError:
        raise NotFoundError(
            f"agent {agent} has no knowledge item {request.ref!r} (a name, alias or id: see "
            f"choirctl knowledge list {agent}, or search its knowledge)"
        ) from None
    level = level_of(item)
    if level is None:
        raise UsageError(
            f"{item.name!r} is not part of the summary tree: expand {EXPANDABLE} "
            f"(choirctl knowledge show {agent} {item.name} shows its edges)"
        )

    found = await expansion(
        agent,
        item,
        store,
        partial(_browse, ctx),
        request.limit,
        request.offset,
        graph=NO_FILTER,
        viewer=EVERYONE,
    )
    leaf = found.leaf
    return a.KnowledgeExpansion(
        agent_id=agent,
        item=knowledge_view(agent, listed(ctx, agent, item)),
        level=level,
        sources=[knowledge_view(agent, listed(ctx, agent, s)) for s in found.sources],
        session_id=None if leaf is None else leaf.session_id,
        from_rev=None if leaf is None else leaf.first,
        upto_rev=None if leaf is None else leaf.last,
        messages=[
            a.SessionMessage(rev=line.rev, who=line.who, text=line.text, cut=line.cut)
            for line in found.messages
        ],
        next_offset=found.next_offset,
    )


async def _browse(
    ctx: OperatorContext, agent: str, session_id: str, after: int, limit: int, viewer: Viewer
) -> BrowsePage:
    """A page of the session's messages, redacted, as `session.messages` reads them."""
    from choir.daemon.memory.tools.browse import browse_page

    return await browse_page(
        ctx.pool, agent, session_id, after_rev=after, limit=limit, viewer=viewer
    )


def level_of(item: KnowledgeItem) -> str | None:
    """Where `item` sits in the summary tree; None when it is not part of it."""
    return next((level for key, level in LEVELS if key in item.metadata), None)
