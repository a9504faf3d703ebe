"""The closed set of knowledge writes (from seed design 002): add, write, rename, alias, remove.

Each is one call in the caller's transaction (`run_as_agent`): a refusal raises before the
transaction commits, so nothing is half-written. The spec's operations map onto the set (§11.7):
insert is `add`, update-by-key is `put` (write the item with that name, or add it), delete is
`remove`. Names and aliases share one namespace per agent (`knowledge_names`): a name that is
taken — as a name or as an alias — is a `KnowledgeNameTaken` naming the holder. Every content
write keeps the previous version (`knowledge_versions`); a rename or an alias changes no content
and adds no version. A changed text drops the item's vector in the same statement, so a search
never ranks the new text by the old text's embedding; the embedding queue writes the new one.
Compaction archives are immutable: their writes, renames and removals are refused
(`knowledge_immutable`).
A content write stores its provenance (who wrote it, `choir.core.memory.knowledge.provenance`) on
the item and the version it adds; None (a caller that knows nothing of it) stores none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from uuid import UUID, uuid4

import asyncpg

from choir.core.memory.knowledge.graph import DEFAULT_TYPE, NO_FIELDS, ItemFields, Placement
from choir.core.memory.knowledge.names import check_name, derived_name
from choir.core.memory.knowledge.provenance import Provenance
from choir.errors import ConflictError
from choir.store.knowledge.immutable import refuse_archive
from choir.store.knowledge.items import KnowledgeItem, check_item, item_by_id, resolve, resolved
from choir.store.postgres.jsonb_safe import encode_text
from choir.store.postgres.pool import Connection

_HOLDER: Final = """
SELECT n.document_id, n.is_alias, d.name FROM knowledge_names n
JOIN knowledge_documents d ON d.id = n.document_id WHERE n.name = $1
"""

_ADD: Final = """
WITH d AS (
    INSERT INTO knowledge_documents
        (id, name, text, metadata, loc, type, data, memory_class, owner_user, provenance)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    RETURNING *
),
n AS (INSERT INTO knowledge_names (name, document_id, is_alias) SELECT name, id, false FROM d)
INSERT INTO knowledge_versions
    (document_id, version, name, text, metadata, written_at, loc, type, data, provenance)
SELECT id, version, name, text, metadata, created_at, loc, type, data, provenance FROM d
"""

# One snapshot: the vector goes exactly when the text changes. `$4` forces a version even when
# nothing changed (a restore is always one); otherwise an unchanged write is a no-op, so a
# retried call does not pile up versions (nor changes the provenance, $9). A NULL text,
# metadata, loc, type or data ($2, $3, $6-$8) keeps the item's own.
_WRITE: Final = """
WITH prior AS (SELECT id, text, metadata, loc, type, data FROM knowledge_documents WHERE id = $1),
next AS (
    SELECT id, coalesce($2, text) AS text, coalesce($3, metadata) AS metadata,
           coalesce($6, loc) AS loc, coalesce($7, type) AS type, coalesce($8, data) AS data,
           (text, metadata, loc, type, data) IS DISTINCT FROM
           (coalesce($2, text), coalesce($3, metadata), coalesce($6, loc), coalesce($7, type),
            coalesce($8, data)) AS changed,
           text IS DISTINCT FROM coalesce($2, text) AS new_text
    FROM prior
),
stale AS (
    DELETE FROM knowledge_embeddings e USING next
    WHERE e.document_id = next.id AND next.new_text
),
d AS (
    UPDATE knowledge_documents k
    SET text = next.text, metadata = next.metadata, loc = next.loc, type = next.type,
        data = next.data, version = k.version + 1, updated_at = now(), provenance = $9
    FROM next WHERE k.id = next.id AND ($4 OR next.changed)
    RETURNING k.*
)
INSERT INTO knowledge_versions (document_id, version, name, text, metadata, written_at,
                                restored_from, loc, type, data, provenance)
SELECT id, version, name, text, metadata, updated_at, $5, loc, type, data, provenance FROM d
"""

# Three statements, in this order: an alias of the item that becomes its name must be gone
# before the name row takes it (CTEs of one statement run in no set order).
_RENAME: Final = (
    "DELETE FROM knowledge_names WHERE document_id = $1 AND name = $2 AND is_alias",
    "UPDATE knowledge_names SET name = $2 WHERE document_id = $1 AND NOT is_alias",
    "UPDATE knowledge_documents SET name = $2, updated_at = now() WHERE id = $1",
)

_ALIAS: Final = "INSERT INTO knowledge_names (name, document_id, is_alias) VALUES ($1, $2, true)"

_REMOVE: Final = "DELETE FROM knowledge_documents WHERE id = $1"


class KnowledgeNameTaken(ConflictError):
    """A name or alias that another item (or this one, as its name) already answers to."""


@dataclass(frozen=True, slots=True)
class Written:
    """What a write did: the item as it is now, and whether it was added or changed."""

    item: KnowledgeItem
    added: bool
    changed: bool
    """A new version was written (False: the same content was written again)."""


async def add_item(
    conn: Connection,
    text: str,
    *,
    name: str | None = None,
    metadata: dict[str, Any],
    fields: ItemFields = NO_FIELDS,
    provenance: Provenance | None = None,
) -> KnowledgeItem:
    """Add an item named `name` (derived from its text when None); a taken name is refused.
    `provenance`: who wrote it (None: unknown)."""
    check_item(text, name, metadata, fields)
    item_id = uuid4()
    name = name if name is not None else derived_name(text, item_id)
    await _check_free(conn, name, "name", None)
    loc, kind = fields.loc or "", (fields.type or DEFAULT_TYPE).value
    memory = fields.memory or Placement("knowledge")
    await _guarded(
        conn.execute(
            _ADD,
            item_id,
            name,
            encode_text(text),
            metadata,
            loc,
            kind,
            fields.data or {},
            memory.memory_class,
            memory.user,
            _stored(provenance),
        ),
        name,
    )
    return await item_by_id(conn, item_id)


async def write_item(
    conn: Connection,
    ref: UUID | str,
    text: str | None,
    *,
    metadata: dict[str, Any] | None = None,
    restored_from: int | None = None,
    fields: ItemFields = NO_FIELDS,
    provenance: Provenance | None = None,
) -> Written:
    """Replace the content of the item `ref` names: its text (None keeps it), its metadata and
    graph fields where given."""
    # A restore writes what was stored under the rules of its day (tags checked since design
    # 003's graph): only what is new is checked.
    check_item(text, None, metadata or {} if restored_from is None else {}, fields)
    item_id = await resolved(conn, ref)
    await refuse_archive(conn, item_id, "restore" if restored_from is not None else "rewrite")
    status: str = await conn.execute(
        _WRITE,
        item_id,
        None if text is None else encode_text(text),
        metadata,
        restored_from is not None,
        restored_from,
        fields.loc,
        None if fields.type is None else fields.type.value,
        fields.data,
        _stored(provenance),
    )
    return Written(await item_by_id(conn, item_id), added=False, changed=status == "INSERT 0 1")


async def put_item(
    conn: Connection,
    text: str,
    *,
    name: str | None = None,
    metadata: dict[str, Any],
    fields: ItemFields = NO_FIELDS,
    provenance: Provenance | None = None,
) -> Written:
    """The spec's insert and update-by-key: write the item `name` names, or add it."""
    check_item(text, name, metadata, fields)
    existing = await resolve(conn, name) if name is not None else None
    if existing is None:
        added = await add_item(
            conn, text, name=name, metadata=metadata, fields=fields, provenance=provenance
        )
        return Written(added, True, True)
    return await write_item(
        conn, existing, text, metadata=metadata, fields=fields, provenance=provenance
    )


async def rename_item(conn: Connection, ref: UUID | str, new_name: str) -> KnowledgeItem:
    """Give the item `ref` names the name `new_name` (one of its own aliases may become it)."""
    check_name(new_name)
    item_id = await resolved(conn, ref)
    await refuse_archive(conn, item_id, "rename")
    await _check_free(conn, new_name, "name", item_id)
    for statement in _RENAME:
        await _guarded(conn.execute(statement, item_id, new_name), new_name)
    return await item_by_id(conn, item_id)


async def alias_item(conn: Connection, ref: UUID | str, alias: str) -> KnowledgeItem:
    """Let the item `ref` names answer to `alias` too; an alias it has already is a no-op."""
    check_name(alias, "alias")
    item_id = await resolved(conn, ref)
    holder = await conn.fetchrow(_HOLDER, alias)
    if holder is not None and holder["document_id"] == item_id and holder["is_alias"]:
        return await item_by_id(conn, item_id)
    await _check_free(conn, alias, "alias", item_id)
    await _guarded(conn.execute(_ALIAS, alias, item_id), alias)
    return await item_by_id(conn, item_id)


async def remove_item(conn: Connection, ref: UUID | str) -> bool:
    """Remove the item `ref` names, with its aliases, versions, vector and edges; whether one
    was."""
    item_id = await resolve(conn, ref)
    if item_id is None:
        return False
    await refuse_archive(conn, item_id, "remove")
    status: str = await conn.execute(_REMOVE, item_id)
    return status == "DELETE 1"


def _stored(provenance: Provenance | None) -> dict[str, Any] | None:
    return None if provenance is None else provenance.as_json()


async def _check_free(conn: Connection, name: str, what: str, owner: UUID | None) -> None:
    """Refuse `name` when an item other than `owner` answers to it, or `owner` by its name."""
    holder = await conn.fetchrow(_HOLDER, name)
    if holder is None or (holder["document_id"] == owner and holder["is_alias"]):
        return
    if holder["document_id"] == owner:
        raise KnowledgeNameTaken(f"the knowledge item is already named {name!r}")
    held = f"an alias of {holder['name']!r}" if holder["is_alias"] else "the name of another item"
    raise KnowledgeNameTaken(
        f"cannot use {name!r} as {what}: it is {held}; choose another {what}, or rename or "
        "remove that item first"
    )


async def _guarded(statement: Any, name: str) -> None:
    """Run `statement`; a concurrent taker of `name` (the primary key's backstop) is refused."""
    try:
        await statement
    except asyncpg.UniqueViolationError:
        raise KnowledgeNameTaken(
            f"{name!r} was just taken by another write; choose another name"
        ) from None
