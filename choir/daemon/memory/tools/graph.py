"""The knowledge graph's part of the memory host tools (seed design 003).

- `choir.memory.upsert` ops add, write and put take `loc`, `type` and `data` (and `tags`, as
  before); write may leave out `text` when it changes only those. Ops `link` and `unlink` add
  and remove a typed edge from item `name` to item `target` (`edge`: relates_to, derived_from,
  supersedes; unlink without `edge` removes every edge between the two).
- `choir.memory.query` on the knowledge store takes `loc` (a subtree), `type` and `tags` (all
  of them) as filters; mode `neighbours` lists the items linked to item `query` (depth 1, both
  directions, `edge_types` to narrow them), filtered the same way.

Every argument is checked here (choird trusts nothing an agent sends): a bad one is a
`UsageError`, which the tool answers as `invalid_input`; a missing item is `not_found`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from choir.core.memory.knowledge.graph import (
    EdgeType,
    GraphFilter,
    ItemFields,
    check_data,
    check_edge_type,
    check_loc,
    check_tags,
    check_type,
)
from choir.errors import UsageError
from choir.protocol import ToolResult

if TYPE_CHECKING:
    from choir.daemon.memory.search.graph import Placed
    from choir.daemon.memory.store import MemoryStore
    from choir.store.knowledge.graph import Neighbour
    from choir.store.knowledge.items import KnowledgeItem

Readable = Callable[["KnowledgeItem"], "KnowledgeItem"]
"""An item as the model may read it: an encrypted one opened with its key, or saying why not."""

NEIGHBOURS_MODE: Final = "neighbours"
GRAPH_OPS: Final = ("link", "unlink")
NEIGHBOUR_TEXT_CHARS: Final = 500
"""Text of one neighbour shown; the rest is a query or a `show` away."""


def item_fields(args: Mapping[str, Any]) -> ItemFields:
    """The loc, type and data an add, write or put sets (absent: unchanged)."""
    loc, kind, data = args.get("loc"), args.get("type"), args.get("data")
    if loc is not None and not isinstance(loc, str):
        raise UsageError("loc must be a string like projects:choir:design")
    if kind is not None and not isinstance(kind, str):
        raise UsageError("type must be one of system, record, info, abstract")
    return ItemFields(
        loc=None if loc is None else check_loc(loc),
        type=None if kind is None else check_type(kind),
        data=None if data is None else check_data(data),
    )


def graph_filter(args: Mapping[str, Any]) -> GraphFilter:
    """The query's loc, type and tags filter (none given: every item)."""
    loc, kind, tags = args.get("loc"), args.get("type"), args.get("tags")
    if loc is not None and (not isinstance(loc, str) or not loc):
        raise UsageError("loc must be a non-empty string like projects:choir")
    if kind is not None and not isinstance(kind, str):
        raise UsageError("type must be one of system, record, info, abstract")
    if tags is not None and not isinstance(tags, list):
        raise UsageError("tags must be a list of labels")
    return GraphFilter(
        loc=None if loc is None else check_loc(loc),
        type=None if kind is None else check_type(kind),
        tags=check_tags(tags or ()),
    )


def edge_types(value: object) -> tuple[EdgeType, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UsageError('edge_types must be a list like ["supersedes"]')
    return tuple(check_edge_type(str(kind)) for kind in value)


async def graph_write(
    op: str, caller: str, args: Mapping[str, Any], name: str, store: MemoryStore
) -> ToolResult:
    """Run op `link` or `unlink` from item `name` to item `target`."""
    target = args.get("target")
    if not isinstance(target, str) or not target.strip():
        raise UsageError(f"op {op} needs target: the name of the item the edge points to")
    edge = args.get("edge")
    if edge is not None and not isinstance(edge, str):
        raise UsageError("edge must be one of " + ", ".join(EdgeType))
    if op == "link":
        if edge is None:
            raise UsageError("op link needs edge: one of " + ", ".join(EdgeType))
        kind = check_edge_type(edge)
        source, dest, new = await store.link_knowledge(caller, name, target, kind)
        done = "linked" if new else "already linked"
        return ToolResult.ok(
            f"{done}: {source.name!r} {kind.value} {dest.name!r}",
            op=op,
            name=source.name,
            target=dest.name,
            edge=kind.value,
            new=new,
        )
    kind_or_all = None if edge is None else check_edge_type(edge)
    removed = await store.unlink_knowledge(caller, name, target, kind_or_all)
    return ToolResult.ok(
        f"removed {removed} edge(s) from {name!r} to {target!r}",
        op=op,
        name=name,
        target=target,
        removed=removed,
    )


async def neighbours(
    caller: str,
    target_agent: str,
    args: Mapping[str, Any],
    store: MemoryStore,
    limit: int,
    graph: GraphFilter,
    readable: Readable = lambda item: item,
) -> ToolResult:
    """Mode `neighbours`: the items linked to item `query`, depth 1, passing `graph` (the
    query's filter and the memories the caller may read); each item as `readable` shows it
    (an encrypted one opened with its key, or saying it is locked)."""
    ref = args.get("query") or args.get("name")
    if not isinstance(ref, str) or not ref.strip():
        raise UsageError("mode neighbours needs query: the name (or alias) of the item")
    item, found = await store.knowledge_neighbours(
        target_agent, ref, types=edge_types(args.get("edge_types")), graph=graph, limit=limit
    )
    whose = "your" if target_agent == caller else f"{target_agent}'s"
    filtered = f" ({graph.describe()})" if graph.describe() else ""
    return ToolResult(
        status="success",
        summary=f"{len(found)} neighbour(s) of {item.name!r} in {whose} knowledge{filtered}",
        data={
            "store": "knowledge",
            "mode": NEIGHBOURS_MODE,
            "target_agent": target_agent,
            "item": item_view(readable(item)),
            "neighbours": [_neighbour(n, readable) for n in found],
        },
    )


def item_view(item: KnowledgeItem, text_chars: int | None = None) -> dict[str, Any]:
    """An item as a tool result shows it: name, graph fields, text (cut to `text_chars`)."""
    shown: dict[str, Any] = {"name": item.name, "id": str(item.id)}
    shown.update(placed_view(item.loc, item.type.value, item.tags))
    if item.data:
        shown["data"] = item.data
    shown["text"] = item.text if text_chars is None else item.text[:text_chars]
    return shown


def placed_view(loc: str, kind: str, tags: tuple[str, ...]) -> dict[str, Any]:
    """loc (when it has one), type, tags (when any): what a hit or an item carries."""
    shown: dict[str, Any] = {"loc": loc} if loc else {}
    shown["type"] = kind
    if tags:
        shown["tags"] = list(tags)
    return shown


def hit_place(placed: Placed | None) -> dict[str, Any]:
    if placed is None:
        return {}
    return placed_view(placed.loc, placed.type.value, placed.tags) | {"memory": placed.memory_class}


def _neighbour(neighbour: Neighbour, readable: Readable) -> dict[str, Any]:
    edge = neighbour.edge
    shown = {"edge": edge.type.value, "direction": edge.direction}
    return shown | item_view(readable(neighbour.item), NEIGHBOUR_TEXT_CHARS)
