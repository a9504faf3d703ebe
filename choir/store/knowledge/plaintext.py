"""Items of an encrypted memory still in the clear: written before the memory was marked
`encrypted` (seed design 003), sealed in place once choird holds the key.

    sealed = await seal_plaintext(conn, ["personal"], sealer)   # {"personal": 2}

Every row of such an item is sealed — its current text and data, and every stored version —
and every vector of the memory's items is deleted (a sealed item never has one). In place: no
version is added, the history keeps its numbers, each version opening to what it held. The
`terms` and `tsv` columns follow the text (generated), and the BM25 change log's trigger sees
the new text, so the in-memory index catches up as after a sealed write. Rows sealed already are
left as they are, so it runs at every keyed start and a second run changes nothing. One call in
the caller's transaction (`run_as_agent`): all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final
from uuid import UUID

from choir.core.memory.sealed_items import SEALED_KEY
from choir.failpoints import failpoint
from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

Sealer = Callable[[str, str, dict[str, Any]], tuple[str, dict[str, Any]]]
"""(memory class, text, data) → the sealed (text, data) to store."""


def _not_sealed(alias: str) -> str:
    """Only data that is not a sealed value: a row whose data is sealed was stored so by
    choir's sealing writes (its text the placeholder), never something to seal twice."""
    return f"NOT ({alias}.data ? '{SEALED_KEY}' AND {alias}.data - '{SEALED_KEY}' = '{{}}'::jsonb)"


_ITEMS: Final = f"""
SELECT d.id, d.memory_class, d.text, d.data FROM knowledge_documents d
WHERE d.memory_class = ANY($1::text[]) AND {_not_sealed("d")}
ORDER BY d.created_at, d.id FOR UPDATE OF d
"""
_VERSIONS: Final = f"""
SELECT v.document_id, v.version, d.memory_class, v.text, v.data
FROM knowledge_versions v JOIN knowledge_documents d ON d.id = v.document_id
WHERE d.memory_class = ANY($1::text[]) AND {_not_sealed("v")}
ORDER BY v.document_id, v.version FOR UPDATE OF v
"""
_SEAL_ITEM: Final = "UPDATE knowledge_documents SET text = $2, data = $3 WHERE id = $1"
_SEAL_VERSION: Final = (
    "UPDATE knowledge_versions SET text = $3, data = $4 WHERE document_id = $1 AND version = $2"
)
_DROP_VECTORS: Final = """
DELETE FROM knowledge_embeddings e USING knowledge_documents d
WHERE e.document_id = d.id AND d.memory_class = ANY($1::text[])
"""


async def seal_plaintext(
    conn: Connection, classes: Sequence[str], sealer: Sealer
) -> dict[str, int]:
    """Seal every row in the clear of the items of memories `classes`, and drop their vectors;
    how many items each class had in the clear (an item counts once, however many of its rows
    were)."""
    items = await conn.fetch(_ITEMS, list(classes))
    versions = await conn.fetch(_VERSIONS, list(classes))
    touched: dict[UUID, str] = {}
    item_rows = []
    for row in items:
        text, data = sealer(row["memory_class"], decode_text(row["text"]), row["data"])
        item_rows.append((row["id"], encode_text(text), data))
        touched[row["id"]] = row["memory_class"]
    await conn.executemany(_SEAL_ITEM, item_rows)
    await failpoint("memory.seal.after_items")  # items sealed, versions not, uncommitted
    version_rows = []
    for row in versions:
        text, data = sealer(row["memory_class"], decode_text(row["text"]), row["data"])
        version_rows.append((row["document_id"], row["version"], encode_text(text), data))
        touched[row["document_id"]] = row["memory_class"]
    await conn.executemany(_SEAL_VERSION, version_rows)
    await conn.execute(_DROP_VECTORS, list(classes))
    counts = dict.fromkeys(classes, 0)
    for memory_class in touched.values():
        counts[memory_class] += 1
    return counts


__all__ = ["Sealer", "seal_plaintext"]
