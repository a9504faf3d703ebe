"""Knowledge as a graph (from seed design 003): typed edges, neighbours, filters by loc, type, tags.

An edge points from a source item to a target item with a type (`EdgeType`); both ends are
named by name, alias or id and must exist, or the link is refused naming the missing one. Edges
hold item ids, so a rename keeps them; removing an item drops its edges (ON DELETE CASCADE).
Linking twice is a no-op. Neighbours are depth 1, both directions, each with its direction.
A `GraphFilter` keeps items whose loc is in a subtree, of a type, carrying all given tags.
Functions take a connection already running as the agent (`run_as_agent`), in its transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal
from uuid import UUID

import asyncpg
from asyncpg import Record

from choir.core.memory.knowledge.graph import NO_FILTER, EdgeType, GraphFilter, GraphRefused
from choir.errors import NotFoundError, UsageError
from choir.store.knowledge.items import (
    COLUMNS,
    LIST_MAX,
    KnowledgeItem,
    item_by_id,
    item_of,
    resolve,
    resolved,
)
from choir.store.postgres.pool import Connection

NEIGHBOURS_MAX: Final = 200
"""Most neighbours (and most edges `show` lists) one answer carries."""

Direction = Literal["out", "in"]


def filter_sql(first: int) -> str:
    """The `GraphFilter` condition on `d`, its six parameters numbered from `first`:
    loc (NULL: any), type (NULL: any), tags (empty: any), the scope's classes (NULL: any), its
    user (NULL: no item with an owner) and whether every user's items pass. An item with an
    owner (personal, or derived from that user's session) passes for its own user only."""
    loc, kind, tags = f"${first}::text", f"${first + 1}::text", f"${first + 2}::text[]"
    classes, user = f"${first + 3}::text[]", f"${first + 4}::text"
    every = f"${first + 5}::boolean"
    return (
        f"({loc} IS NULL OR d.loc = {loc} OR starts_with(d.loc, {loc} || ':')) "
        f"AND ({kind} IS NULL OR d.type = {kind}) "
        f"AND (cardinality({tags}) = 0 OR d.metadata -> 'tags' @> to_jsonb({tags})) "
        f"AND ({classes} IS NULL OR (d.memory_class = ANY({classes}) "
        f"AND (d.owner_user = '' OR {every} OR d.owner_user = {user})))"
    )


def filter_args(
    graph: GraphFilter,
) -> tuple[str | None, str | None, list[str], list[str] | None, str | None, bool]:
    scope = graph.scope
    return (
        graph.loc,
        None if graph.type is None else graph.type.value,
        list(graph.tags),
        None if scope is None else list(scope.classes),
        None if scope is None else scope.user,
        scope is not None and scope.every_user,
    )


_LINK: Final = """
INSERT INTO knowledge_edges (source_id, type, target_id) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
"""
_UNLINK: Final = """
DELETE FROM knowledge_edges
WHERE source_id = $1 AND target_id = $2 AND ($3::text IS NULL OR type = $3)
"""

# Both directions of depth 1: the item's out-edges (to their targets), then its in-edges.
_NEIGHBOURS: Final = f"""
SELECT * FROM (
    SELECT e.type AS edge_type, 'out' AS direction, e.created_at AS linked_at, {COLUMNS}
    FROM knowledge_edges e JOIN knowledge_documents d ON d.id = e.target_id
    WHERE e.source_id = $1 AND (cardinality($2::text[]) = 0 OR e.type = ANY($2))
        AND {filter_sql(4)}
    UNION ALL
    SELECT e.type, 'in', e.created_at, {COLUMNS}
    FROM knowledge_edges e JOIN knowledge_documents d ON d.id = e.source_id
    WHERE e.target_id = $1 AND (cardinality($2::text[]) = 0 OR e.type = ANY($2))
        AND {filter_sql(4)}
) AS n ORDER BY linked_at, edge_type, name LIMIT $3
"""

_LIST: Final = f"""
SELECT {COLUMNS} FROM knowledge_documents d
WHERE ($2::timestamptz IS NULL OR (d.created_at, d.id) > ($2, $3)) AND {filter_sql(4)}
ORDER BY d.created_at, d.id LIMIT $1
"""
_POSITION: Final = "SELECT created_at FROM knowledge_documents WHERE id = $1"

_PASSING: Final = f"SELECT d.id FROM knowledge_documents d WHERE d.id = ANY($1) AND {filter_sql(2)}"


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge seen from an item: its type, which way it points, the item at its other end."""

    type: EdgeType
    direction: Direction
    """`out`: this item is the source (this item `type` the other); `in`: the target."""
    other_id: UUID
    other_name: str
    linked_at: datetime


@dataclass(frozen=True, slots=True)
class Neighbour:
    edge: Edge
    item: KnowledgeItem


async def link(
    conn: Connection, source: UUID | str, target: UUID | str, edge_type: EdgeType
) -> tuple[KnowledgeItem, KnowledgeItem, bool]:
    """Link `source` to `target` with an edge of `edge_type`; the two items and whether the
    edge is new (an edge that exists already is a no-op)."""
    source_id, target_id = await _ends(conn, source, target, "link")
    if source_id == target_id:
        raise GraphRefused(
            f"cannot link {str(source)!r} to itself: an edge joins two different items"
        )
    try:
        status: str = await conn.execute(_LINK, source_id, edge_type.value, target_id)
    except asyncpg.ForeignKeyViolationError:  # an end removed since it was resolved
        raise NotFoundError(
            f"cannot link {str(source)!r} and {str(target)!r}: one of them was just removed; "
            "list the items and link again"
        ) from None
    source_item, target_item = await item_by_id(conn, source_id), await item_by_id(conn, target_id)
    return source_item, target_item, status == "INSERT 0 1"


async def unlink(
    conn: Connection, source: UUID | str, target: UUID | str, edge_type: EdgeType | None
) -> int:
    """Remove the edges from `source` to `target` (of `edge_type`, or of every type); how many.
    None removed is a `NotFoundError` naming the edge, so a mistyped unlink is not silent."""
    source_id, target_id = await _ends(conn, source, target, "unlink")
    status: str = await conn.execute(
        _UNLINK, source_id, target_id, None if edge_type is None else edge_type.value
    )
    removed = int(status.split()[-1])
    if removed == 0:
        what = f"{edge_type.value} edge" if edge_type is not None else "edge"
        raise NotFoundError(
            f"there is no {what} from {str(source)!r} to {str(target)!r}; show the item to "
            "see its edges"
        )
    return removed


async def neighbours(
    conn: Connection,
    ref: UUID | str,
    *,
    types: Collection[EdgeType] = (),
    graph: GraphFilter = NO_FILTER,
    limit: int = NEIGHBOURS_MAX,
) -> tuple[KnowledgeItem, list[Neighbour]]:
    """The item `ref` names and its neighbours at depth 1 (edges of `types`, every type when
    empty; neighbours passing `graph`), oldest edge first."""
    if not 1 <= limit <= NEIGHBOURS_MAX:
        raise UsageError(f"a neighbour list holds 1 to {NEIGHBOURS_MAX} items, not {limit}")
    item_id = await resolved(conn, ref)
    rows = await conn.fetch(
        _NEIGHBOURS, item_id, [t.value for t in types], limit, *filter_args(graph)
    )
    return await item_by_id(conn, item_id), [Neighbour(_edge(row), item_of(row)) for row in rows]


async def edges_of(conn: Connection, item_id: UUID, *, limit: int = NEIGHBOURS_MAX) -> list[Edge]:
    """The edges of item `item_id`, both directions, oldest first."""
    _, found = await neighbours(conn, item_id, limit=limit)
    return [neighbour.edge for neighbour in found]


async def list_filtered(
    conn: Connection, graph: GraphFilter, *, limit: int, after: UUID | str | None = None
) -> list[KnowledgeItem]:
    """Up to `limit` items passing `graph`, oldest first, after the item with id `after`."""
    if not 1 <= limit <= LIST_MAX:
        raise UsageError(f"a knowledge page lists 1 to {LIST_MAX} items, not {limit}")
    position, after_id = None, None
    if after is not None:
        try:
            after_id = after if isinstance(after, UUID) else UUID(after)
        except ValueError:
            raise UsageError(f"{after!r} is not a knowledge item id (a UUID)") from None
        position = await conn.fetchval(_POSITION, after_id)
        if position is None:
            raise NotFoundError(f"no knowledge item {after}: list again from the start")
    rows = await conn.fetch(_LIST, limit, position, after_id, *filter_args(graph))
    return [item_of(row) for row in rows]


async def passing(conn: Connection, ids: Sequence[UUID], graph: GraphFilter) -> set[UUID]:
    """Those of `ids` whose items pass `graph`."""
    rows = await conn.fetch(_PASSING, list(ids), *filter_args(graph))
    return {row["id"] for row in rows}


async def _ends(
    conn: Connection, source: UUID | str, target: UUID | str, verb: str
) -> tuple[UUID, UUID]:
    """The ids of both ends; a missing one is refused naming it (nothing written yet)."""
    source_id, target_id = await resolve(conn, source), await resolve(conn, target)
    for ref, found in ((source, source_id), (target, target_id)):
        if found is None:
            raise NotFoundError(
                f"cannot {verb} {str(source)!r} and {str(target)!r}: there is no knowledge "
                f"item named {str(ref)!r} (by name, alias or id); add it first or list the items"
            )
    assert source_id is not None
    assert target_id is not None
    return source_id, target_id


def _edge(row: Record) -> Edge:
    return Edge(
        type=EdgeType(row["edge_type"]),
        direction="out" if row["direction"] == "out" else "in",
        other_id=row["id"],
        other_name=row["name"],
        linked_at=row["linked_at"],
    )
