"""Knowledge as a graph (seed design 003) on real Postgres: loc, type, tags and data kept in
versions; typed edges that survive renames and go with removals; filters and neighbours."""

from __future__ import annotations

import uuid

import pytest

from choir.core.memory.knowledge.graph import (
    DATA_MAX_BYTES,
    EdgeType,
    GraphFilter,
    GraphRefused,
    ItemFields,
    ItemType,
)
from choir.daemon.memory.search.graph import DEPTHS
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError
from choir.store.agent_schema import ensure_agent_schema
from choir.store.knowledge.items import KnowledgeRefused
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.conftest import DIMS
from tests.memory.store.support import vec

BEFORE_GRAPH = 7
"""The last agent migration without loc, type, data and edges."""


async def test_graph_fields_are_written_kept_in_versions_and_restored(
    store: PostgresMemoryStore, ada: str
) -> None:
    fields = ItemFields(loc="projects:choir:design", type=ItemType.RECORD, data={"n": 1})
    item = await store.add_knowledge(
        ada, "the design", name="design", metadata={"tags": ["a", "b"]}, fields=fields
    )
    assert (item.loc, item.type, item.data, item.tags) == (
        "projects:choir:design",
        ItemType.RECORD,
        {"n": 1},
        ("a", "b"),
    )
    moved = await store.write_knowledge(
        ada, "design", None, fields=ItemFields(loc="projects:choir", data={"n": 2})
    )
    assert (moved.changed, moved.item.version, moved.item.text) == (True, 2, "the design")
    assert (moved.item.loc, moved.item.type, moved.item.data) == (
        "projects:choir",
        ItemType.RECORD,  # not given: kept
        {"n": 2},
    )
    same = await store.write_knowledge(ada, "design", None, fields=ItemFields(loc="projects:choir"))
    assert (same.changed, same.item.version) == (False, 2)

    restored = await store.restore_knowledge(ada, "design", 1)
    assert (restored.item.version, restored.item.loc, restored.item.data) == (
        3,
        "projects:choir:design",
        {"n": 1},
    )
    _, versions = await store.knowledge_history(ada, "design", limit=10)
    assert [(v.version, v.loc, v.type, v.data) for v in versions] == [
        (3, "projects:choir:design", ItemType.RECORD, {"n": 1}),
        (2, "projects:choir", ItemType.RECORD, {"n": 2}),
        (1, "projects:choir:design", ItemType.RECORD, {"n": 1}),
    ]
    plain = await store.put_knowledge(ada, "no graph fields given", name="plain")
    assert (plain.loc, plain.type, plain.data, plain.tags) == ("", ItemType.INFO, {}, ())


@pytest.mark.parametrize(
    ("fields", "metadata", "error"),
    [
        (ItemFields(loc="projects::x"), {}, "has an empty segment"),
        (ItemFields(loc="Projects:x"), {}, "the segment 'Projects'"),
        (ItemFields(data={"x": "y" * DATA_MAX_BYTES}), {}, "over the limit of 16384"),
        (ItemFields(), {"tags": ["two words"]}, "tag 'two words' is not a label"),
    ],
)
async def test_bad_graph_fields_are_refused_and_nothing_is_written(
    store: PostgresMemoryStore,
    ada: str,
    fields: ItemFields,
    metadata: dict[str, object],
    error: str,
) -> None:
    await store.add_knowledge(ada, "kept as it was", name="kept", fields=ItemFields(loc="a"))

    with pytest.raises(GraphRefused, match=error):
        await store.add_knowledge(ada, "new", name="new", metadata=metadata, fields=fields)
    with pytest.raises(GraphRefused, match=error):
        await store.write_knowledge(
            ada, "kept", "changed", metadata=metadata or None, fields=fields
        )

    assert [item.name for item in await store.list_knowledge(ada, limit=10)] == ["kept"]
    kept = await store.get_knowledge(ada, "kept")
    assert (kept.text, kept.loc, kept.version) == ("kept as it was", "a", 1)


async def test_edges_link_unlink_and_show_both_directions(
    store: PostgresMemoryStore, ada: str
) -> None:
    for name in ("fact.old", "fact.new", "summary"):
        await store.add_knowledge(ada, f"text of {name}", name=name)
    await store.alias_knowledge(ada, "fact.old", "old")

    source, target, new = await store.link_knowledge(ada, "fact.new", "old", EdgeType.SUPERSEDES)
    assert (source.name, target.name, new) == ("fact.new", "fact.old", True)
    again = await store.link_knowledge(ada, "fact.new", "fact.old", EdgeType.SUPERSEDES)
    assert again[2] is False  # linking twice is a no-op
    await store.link_knowledge(ada, "summary", "fact.new", EdgeType.DERIVED_FROM)
    await store.link_knowledge(ada, "summary", "fact.old", EdgeType.DERIVED_FROM)

    item, found = await store.knowledge_neighbours(ada, "fact.new")
    assert item.name == "fact.new"
    assert [(n.edge.type, n.edge.direction, n.item.name) for n in found] == [
        (EdgeType.SUPERSEDES, "out", "fact.old"),
        (EdgeType.DERIVED_FROM, "in", "summary"),
    ]
    _, only = await store.knowledge_neighbours(ada, "summary", types=[EdgeType.SUPERSEDES])
    assert only == []

    assert await store.unlink_knowledge(ada, "summary", "fact.old", None) == 1
    with pytest.raises(NotFoundError, match=r"no derived_from edge from 'summary' to 'fact\.old'"):
        await store.unlink_knowledge(ada, "summary", "fact.old", EdgeType.DERIVED_FROM)


async def test_edges_to_missing_items_and_to_itself_are_refused(
    store: PostgresMemoryStore, ada: str
) -> None:
    await store.add_knowledge(ada, "a fact", name="fact")

    with pytest.raises(NotFoundError, match="no knowledge item named 'ghost'"):
        await store.link_knowledge(ada, "fact", "ghost", EdgeType.RELATES_TO)
    with pytest.raises(NotFoundError, match="no knowledge item named 'ghost'"):
        await store.link_knowledge(ada, "ghost", "fact", EdgeType.RELATES_TO)
    with pytest.raises(GraphRefused, match="to itself"):
        await store.link_knowledge(ada, "fact", "fact", EdgeType.RELATES_TO)
    _, found = await store.knowledge_neighbours(ada, "fact")
    assert found == []


async def test_a_rename_keeps_edges_and_a_removal_drops_them(
    store: PostgresMemoryStore, ada: str
) -> None:
    for name in ("a", "b", "c"):
        await store.add_knowledge(ada, f"item {name}", name=name)
    await store.link_knowledge(ada, "a", "b", EdgeType.RELATES_TO)
    await store.link_knowledge(ada, "c", "a", EdgeType.DERIVED_FROM)

    await store.rename_knowledge(ada, "a", "alpha")
    _, found = await store.knowledge_neighbours(ada, "alpha")
    assert [n.item.name for n in found] == ["b", "c"]
    _, of_b = await store.knowledge_neighbours(ada, "b")
    assert [(n.edge.direction, n.edge.other_name) for n in of_b] == [("in", "alpha")]

    assert await store.delete_knowledge(ada, "alpha")
    for name in ("b", "c"):
        _, left = await store.knowledge_neighbours(ada, name)
        assert left == []


async def test_filters_keep_a_loc_subtree_a_type_and_all_given_tags(
    store: PostgresMemoryStore, ada: str
) -> None:
    items = [
        ("root", "projects:choir", ItemType.INFO, ["x"]),
        ("design", "projects:choir:design", ItemType.RECORD, ["x", "y"]),
        ("other", "projects:choirx", ItemType.RECORD, ["x", "y"]),
        ("none", "", ItemType.RECORD, ["y"]),
    ]
    for name, loc, kind, tags in items:
        await store.add_knowledge(
            ada,
            f"deploy notes {name}",
            name=name,
            metadata={"tags": tags},
            fields=ItemFields(loc=loc, type=kind),
        )

    async def names(graph: GraphFilter) -> list[str]:
        return [item.name for item in await store.list_knowledge(ada, limit=10, graph=graph)]

    assert await names(GraphFilter(loc="projects:choir")) == ["root", "design"]
    assert await names(GraphFilter(type=ItemType.RECORD)) == ["design", "other", "none"]
    assert await names(GraphFilter(tags=("x", "y"))) == ["design", "other"]
    assert await names(GraphFilter(loc="projects", type=ItemType.RECORD, tags=("y",))) == [
        "design",
        "other",
    ]
    first = await store.list_knowledge(ada, limit=1, graph=GraphFilter(tags=("y",)))
    after = await store.list_knowledge(
        ada, limit=5, graph=GraphFilter(tags=("y",)), after=first[0].id
    )
    assert [item.name for item in after] == ["other", "none"]

    hits = await store.search_placed(
        ada,
        MemoryQuery(store="knowledge", mode="text", text="deploy"),
        GraphFilter(loc="projects:choir"),
    )
    assert sorted(hit.hit.source.name or "" for hit in hits) == ["design", "root"]
    placed = {hit.hit.source.name: hit.placed for hit in hits}
    assert placed["design"] is not None
    assert (placed["design"].loc, placed["design"].type, placed["design"].tags) == (
        "projects:choir:design",
        ItemType.RECORD,
        ("x", "y"),
    )


async def test_a_filtered_search_reads_deeper_than_its_limit(
    store: PostgresMemoryStore, ada: str
) -> None:
    """The one item in the subtree ranks below `DEPTHS[0]` others: it is still found."""
    depth = DEPTHS[0]
    for n in range(depth + 20):
        item = await store.add_knowledge(ada, f"deploy deploy deploy {n}", name=f"n{n}")
        await store.set_vectors(ada, "knowledge", [(item.id, vec(1, n % 7 / 100, n % 11 / 100))])
    deep = await store.add_knowledge(
        ada, "deploy " + "filler " * 50, name="deep", fields=ItemFields(loc="projects:x")
    )
    await store.set_vectors(ada, "knowledge", [(deep.id, vec(0, 1, 0))])
    graph = GraphFilter(loc="projects")
    for query in (
        MemoryQuery(store="knowledge", mode="text", text="deploy", limit=3),
        MemoryQuery(store="knowledge", mode="semantic", vector=vec(1, 0, 0), limit=3),
        MemoryQuery(store="knowledge", mode="hybrid", text="deploy", vector=vec(1, 0, 0), limit=3),
    ):
        hits = await store.search_placed(ada, query, graph)
        assert [hit.hit.source.name for hit in hits] == ["deep"], query.mode


async def test_migration_8_gives_older_items_no_loc_and_type_info(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    async with pool.acquire() as conn:
        await apply_migrations(
            conn, f"agent:{agent_id}", AGENT_MIGRATIONS[:BEFORE_GRAPH], schema=schema, dims=DIMS
        )
        item_id = await conn.fetchval(
            f"INSERT INTO {schema}.knowledge_documents (name, text) VALUES ('first', 'stored') "
            "RETURNING id"
        )
        await conn.execute(
            f"INSERT INTO {schema}.knowledge_names VALUES ('first', $1, false); "
            f"INSERT INTO {schema}.knowledge_versions (document_id, version, name, text, metadata) "
            "VALUES ($1, 1, 'first', 'stored', '{}')".replace("$1", f"'{item_id}'")
        )
        await ensure_agent_schema(conn, agent_id, DIMS)  # choird's next start: migration 8
    store = PostgresMemoryStore(pool)
    item = await store.get_knowledge(agent_id, "first")
    assert (item.id, item.loc, item.type, item.data) == (item_id, "", ItemType.INFO, {})
    await store.link_knowledge(
        agent_id, "first", await _second(store, agent_id), EdgeType.RELATES_TO
    )
    _, versions = await store.knowledge_history(agent_id, "first", limit=5)
    assert [(v.version, v.loc, v.type) for v in versions] == [(1, "", ItemType.INFO)]


async def _second(store: PostgresMemoryStore, agent_id: str) -> str:
    return (await store.add_knowledge(agent_id, "added after", name="second")).name


async def test_a_too_large_text_with_graph_fields_is_still_refused(
    store: PostgresMemoryStore, ada: str
) -> None:
    with pytest.raises(KnowledgeRefused, match="over the limit"):
        await store.add_knowledge(ada, "x" * 40_000, fields=ItemFields(loc="a"))


async def test_a_version_with_tags_of_before_the_graph_still_restores(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    item = await store.add_knowledge(ada, "prefers vim", name="editor")
    async with pool.acquire() as conn:  # a tag stored before tags were checked
        await conn.execute(
            f"UPDATE {quote_ident(agent_schema(ada))}.knowledge_versions "
            """SET metadata = '{"tags": ["two words"]}' WHERE document_id = $1""",
            item.id,
        )
    await store.write_knowledge(ada, "editor", "prefers helix")

    restored = await store.restore_knowledge(ada, "editor", 1)

    assert (restored.item.text, restored.item.tags) == ("prefers vim", ("two words",))
    with pytest.raises(GraphRefused, match="not a label"):
        await store.write_knowledge(ada, "editor", "x", metadata={"tags": ["two words"]})
