"""`choir.memory.query` store `knowledge` mode `expand`: one step down the summary tree.

    {"store": "knowledge", "mode": "expand", "query": "summary/0123456789abcdef"}

A search hit on a summary is expanded by its name: a roll-up (a root, `rollup/<ISO minute>`) to
the session summaries it covers, a session summary (a branch) to the items it was derived
from — its compaction archives and tool sequences, whole up to `HIT_CHARS` each —, a leaf (an
archive, or a tool sequence `tools/<session>/<rev>`) to its source events, the session's
messages in its rev range, each with who said it (a page of `limit`; `offset` reads on). Any
other item expands to what it was derived from, if anything.

`expansion` is the step itself, shared with the operator's `knowledge.expand`
(`choir.daemon.operator.memory.expand`), which sees every user's items and sessions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.access import Viewer
from choir.core.memory.knowledge.graph import NO_FILTER, EdgeType, GraphFilter
from choir.core.memory.summaries.archives import ARCHIVE_KEY
from choir.core.memory.summaries.tree import TOOLS_KEY
from choir.daemon.memory.tools.graph import Readable, item_view
from choir.errors import UsageError
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from choir.core.memory.browse import MessageLine
    from choir.daemon.memory.store import MemoryStore
    from choir.daemon.memory.tools.browse import BrowsePage
    from choir.store.knowledge.items import KnowledgeItem

EXPAND_MODE: Final = "expand"
SOURCE_TEXT_CHARS: Final = 1_500
"""Text of one source item shown; the rest is another `expand` or a `show` away."""

Browse = Callable[[str, str, int, int, Viewer], Awaitable["BrowsePage"]]
"""(agent, session id, after rev, limit, who reads) → a page of the session's messages."""


@dataclass(frozen=True, slots=True)
class Leaf:
    """The session events a leaf (an archive, a tool sequence) covers: revs `first`-`last`."""

    session_id: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Expansion:
    """One step down the summary tree from `item`: its `sources` (a roll-up's summaries, a
    summary's archives and tool leaf), or for a leaf its session's `messages` (a page)."""

    item: KnowledgeItem
    sources: list[KnowledgeItem] = field(default_factory=list)
    leaf: Leaf | None = None
    messages: list[MessageLine] = field(default_factory=list)
    next_offset: int | None = None
    """The offset that reads a leaf's next page of messages; None after its last."""


def leaf_of(item: KnowledgeItem) -> Leaf | None:
    """The events `item` covers when it is a leaf of the tree; None for any other item."""
    leaf = item.metadata.get(ARCHIVE_KEY) or item.metadata.get(TOOLS_KEY)
    if not isinstance(leaf, dict):
        return None
    return Leaf(str(leaf["session_id"]), int(leaf["from_rev"]), int(leaf["upto_rev"]))


async def expansion(
    target: str,
    item: KnowledgeItem,
    store: MemoryStore,
    browse: Browse | None,
    limit: int,
    offset: Any,
    *,
    graph: GraphFilter,
    viewer: Viewer,
) -> Expansion:
    """`item` (of `target`'s knowledge) one step down: a leaf's messages from `offset` (None:
    its first), only if `viewer` sees its session's; else the items it was derived from that
    pass `graph`, as stored (the caller makes them readable)."""
    leaf = leaf_of(item)
    if leaf is None:
        _, found = await store.knowledge_neighbours(
            target, item.id, types=(EdgeType.DERIVED_FROM,), graph=graph, limit=limit
        )
        return Expansion(item, sources=[n.item for n in found if n.edge.direction == "out"])
    if browse is None:
        raise UsageError("expanding an archive to its events is not served here")
    if offset is None:
        offset = leaf.first - 1
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError("offset must be an integer from 0 (a next_offset)")
    page = await browse(target, leaf.session_id, max(offset, leaf.first - 1), limit, viewer)
    lines = [line for line in page.lines if line.rev <= leaf.last]
    more = page.next_offset is not None and page.next_offset < leaf.last
    return Expansion(
        item, leaf=leaf, messages=lines, next_offset=page.next_offset if more else None
    )


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
    found = await expansion(
        target, item, store, browse, limit, args.get("offset"), graph=graph, viewer=viewer
    )
    if found.leaf is not None:
        return _events(found, found.leaf, whose)
    return ToolResult(
        status="success",
        summary=f"{item.name!r} in {whose} knowledge was derived from {len(found.sources)} "
        "item(s); expand a summary among them for its archives, an archive for its source events",
        data={
            "store": "knowledge",
            "mode": EXPAND_MODE,
            "item": item_view(item, SOURCE_TEXT_CHARS),
            "sources": [item_view(readable(s), SOURCE_TEXT_CHARS) for s in found.sources],
        },
    )


def _events(found: Expansion, leaf: Leaf, whose: str) -> ToolResult:
    """An archive's source events: its session's messages from `from_rev` to `upto_rev`."""
    item, lines = found.item, found.messages
    return ToolResult(
        status="success",
        summary=f"{len(lines)} source message(s) of {item.name!r} in {whose} memory "
        f"(session {leaf.session_id}, revs {leaf.first}-{leaf.last})"
        + (f"; read on with offset {found.next_offset}" if found.next_offset is not None else ""),
        data={
            "store": "knowledge",
            "mode": EXPAND_MODE,
            "item": item_view(item, SOURCE_TEXT_CHARS),
            "session_id": leaf.session_id,
            "from_rev": leaf.first,
            "upto_rev": leaf.last,
            "messages": [{"rev": line.rev, "who": line.who, "text": line.text} for line in lines],
            "next_offset": found.next_offset,
        },
    )
