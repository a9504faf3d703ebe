"""`choir.memory.query` store `knowledge` mode `expand`: one step down the summary tree.

    {"store": "knowledge", "mode": "expand", "query": "summary/0123456789abcdef"}

A search hit on a summary is expanded by its name: a roll-up (a root, `rollup/<ISO minute>`) to
the session summaries it covers, a session summary (a branch) to the items it was derived
from — its compaction archives and tool sequences, whole up to `HIT_CHARS` each —, a leaf (an
archive, or a tool sequence `tools/<session>/<rev>`) to its source events, the session's
messages in its rev range, each with who said it (a page of `limit`; `offset` reads on). Any
other item expands to what it was derived from, if anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.access import Viewer
from choir.core.memory.knowledge.graph import NO_FILTER, EdgeType, GraphFilter
from choir.core.memory.summaries.archives import ARCHIVE_KEY
from choir.core.memory.summaries.tree import TOOLS_KEY
from choir.daemon.memory.tools.graph import Readable, item_view
from choir.errors import UsageError
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from choir.daemon.memory.store import MemoryStore
    from choir.daemon.memory.tools.browse import BrowsePage
    from choir.store.knowledge.items import KnowledgeItem

EXPAND_MODE: Final = "expand"
SOURCE_TEXT_CHARS: Final = 1_500
"""Text of one source item shown; the rest is another `expand` or a `show` away."""

Browse = Callable[[str, str, int, int, Viewer], Awaitable["BrowsePage"]]
"""(agent, session id, after rev, limit, who reads) → a page of the session's messages."""


async def expand(
    caller: str,
    target: str,
    args: Mapping[str, Any],
    store: MemoryStore,
    browse: Browse | None,
    limit: int,
    readable: Readable = lambda item: item,
    *,
    graph: GraphFilter = NO_FILTER,
    viewer: Viewer,
) -> ToolResult:
    """Mode `expand`: the sources of the item `query` names, one level down, each as
    `readable` shows it (an encrypted one opened with its key, or saying it is locked); only
    sources passing `graph` (the caller's memories: never another user's), a leaf's events
    only if `viewer` sees its session's."""
    ref = args.get("query") or args.get("name")
    if not isinstance(ref, str) or not ref.strip():
        raise UsageError("mode expand needs query: the name of a summary or an archive")
    item = readable(await store.get_knowledge(target, ref))
    whose = "your" if target == caller else f"{target}'s"
    leaf = item.metadata.get(ARCHIVE_KEY) or item.metadata.get(TOOLS_KEY)
    if isinstance(leaf, dict):
        return await _events(target, item, leaf, args, browse, limit, whose, viewer)
    _, found = await store.knowledge_neighbours(
        target, item.id, types=(EdgeType.DERIVED_FROM,), graph=graph, limit=limit
    )
    sources = [n.item for n in found if n.edge.direction == "out"]
    return ToolResult(
        status="success",
        summary=f"{item.name!r} in {whose} knowledge was derived from {len(sources)} item(s); "
        "expand a summary among them for its archives, an archive for its source events",
        data={
            "store": "knowledge",
            "mode": EXPAND_MODE,
            "item": item_view(item, SOURCE_TEXT_CHARS),
            "sources": [item_view(readable(source), SOURCE_TEXT_CHARS) for source in sources],
        },
    )


async def _events(
    target: str,
    item: KnowledgeItem,
    leaf: dict[str, Any],
    args: Mapping[str, Any],
    browse: Browse | None,
    limit: int,
    whose: str,
    viewer: Viewer,
) -> ToolResult:
    """An archive's source events: its session's messages from `from_rev` to `upto_rev`."""
    if browse is None:
        raise UsageError("expanding an archive to its events is not served here")
    session_id, first, last = leaf["session_id"], int(leaf["from_rev"]), int(leaf["upto_rev"])
    offset = args.get("offset", first - 1)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError("offset must be an integer from 0 (a next_offset)")
    page = await browse(target, session_id, max(offset, first - 1), limit, viewer)
    lines = [line for line in page.lines if line.rev <= last]
    more = page.next_offset is not None and page.next_offset < last
    return ToolResult(
        status="success",
        summary=f"{len(lines)} source message(s) of {item.name!r} in {whose} memory "
        f"(session {session_id}, revs {first}-{last})"
        + (f"; read on with offset {page.next_offset}" if more else ""),
        data={
            "store": "knowledge",
            "mode": EXPAND_MODE,
            "item": item_view(item, SOURCE_TEXT_CHARS),
            "session_id": session_id,
            "from_rev": first,
            "upto_rev": last,
            "messages": [{"rev": line.rev, "who": line.who, "text": line.text} for line in lines],
            "next_offset": page.next_offset if more else None,
        },
    )
