"""Embeddings of session chunks and knowledge items (§23.2-23.3): written, and found missing.

Vectors arrive after their rows (the embedding queue, a backfill), so a row may have been
deleted, promoted or given a new text in between: such vectors are skipped, never an error. A
promoted (`long_term_detail`) chunk never gets one back, and a vector sent with the text it was
computed from is written only if the row still holds that text: otherwise an updated item could
keep its old text's vector for good (if the new text's embedding failed, nothing would tell).
The rows are locked `FOR KEY SHARE` while the vectors go in, so a delete racing the write waits
or is seen, never a foreign-key failure. A vector of the wrong size is refused before anything
is written: a mixed-size column cannot be searched. Functions take a connection already running
as the agent (`run_as_agent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias
from uuid import UUID

import numpy as np
import numpy.typing as npt
from pgvector import Vector as PgVector

from choir.errors import UsageError
from choir.store.postgres.jsonb_safe import decode_text, encode_text
from choir.store.postgres.pool import Connection

VectorTarget: TypeAlias = Literal["memory", "knowledge"]
"""Which embeddings: session chunks (`memory_embeddings`) or knowledge items."""
VECTOR_TARGETS: Final[tuple[VectorTarget, ...]] = ("memory", "knowledge")
Array: TypeAlias = npt.NDArray[np.float32]
VectorOf: TypeAlias = tuple[UUID | str, npt.ArrayLike] | tuple[UUID | str, npt.ArrayLike, str]
"""A row's id and its vector, optionally with the text the vector was computed from."""

# `vector[]` is bound as pgvector's own objects: asyncpg would walk a numpy array's floats as
# one more array dimension. The column's size is read by the statement that writes (one round
# trip per write): nothing is written unless every vector has it (`$4`, -1 for mixed sizes), and
# the size comes back for the refusal's message.
_UPSERT: Final = """
WITH dims AS (
    SELECT atttypmod AS n FROM pg_attribute
    WHERE attrelid = to_regclass('{target}_embeddings') AND attname = 'embedding'
), written AS (
    INSERT INTO {target}_embeddings (document_id, embedding)
    SELECT d.id, v.embedding
    FROM unnest($1::uuid[], $2::vector[], $3::text[]) AS v (id, embedding, text)
    JOIN {target}_documents d
        ON d.id = v.id AND (v.text IS NULL OR d.text = v.text) {only_searched}
    WHERE $4::int = (SELECT n FROM dims)
    FOR KEY SHARE OF d
    ON CONFLICT (document_id) DO UPDATE SET embedding = EXCLUDED.embedding
    RETURNING 1
)
SELECT (SELECT n FROM dims) AS dims, (SELECT count(*) FROM written) AS written
"""
_UPSERTS: Final = {
    "memory": _UPSERT.format(target="memory", only_searched="AND d.tier <> 'long_term_detail'"),
    "knowledge": _UPSERT.format(target="knowledge", only_searched=""),
}

_MISSING: Final = """
(SELECT 'memory' AS target, d.id, d.text FROM memory_documents d
 WHERE d.tier IN ('mid_term', 'long_term_summary')
   AND NOT EXISTS (SELECT FROM memory_embeddings e WHERE e.document_id = d.id)
 ORDER BY d.created_at, d.id LIMIT $1)
UNION ALL
(SELECT 'knowledge', d.id, d.text FROM knowledge_documents d
 WHERE NOT EXISTS (SELECT FROM knowledge_embeddings e WHERE e.document_id = d.id)
   AND NOT (d.data ? 'choir_sealed' AND d.data - 'choir_sealed' = '{}'::jsonb)
 ORDER BY d.created_at, d.id LIMIT $1)
LIMIT $1
"""


@dataclass(frozen=True, slots=True)
class MissingVector:
    """A searchable row without its embedding: what a backfill embeds."""

    target: VectorTarget
    id: UUID
    text: str


class VectorRefused(UsageError):
    """Vectors that cannot be stored (wrong size, not finite, a bad id)."""


async def set_vectors(conn: Connection, target: VectorTarget, vectors: Sequence[VectorOf]) -> int:
    """Store (or replace) the embeddings of rows of `target`; how many were written (rows gone,
    promoted or holding another text than the one given are skipped). All or nothing: one bad
    vector refuses the lot."""
    if target not in _UPSERTS:
        raise VectorRefused(f"unknown vector target {target!r}: use memory or knowledge")
    latest = {_as_uuid(item[0]): _parts(item) for item in vectors}
    if not latest:
        return 0
    sizes = {len(array) for array, _ in latest.values()}
    row = await conn.fetchrow(
        _UPSERTS[target],
        list(latest),
        [PgVector(array) for array, _ in latest.values()],
        [text for _, text in latest.values()],
        next(iter(sizes)) if len(sizes) == 1 else -1,
    )
    assert row is not None  # the outer SELECT always yields one row
    _check_dims(target, sizes, row["dims"])
    return int(row["written"])


def _parts(item: VectorOf) -> tuple[Array, str | None]:
    text = item[2] if len(item) == 3 else None  # (id, vector, text)
    return _as_array(item[1]), encode_text(text) if text is not None else None


async def missing_vectors(conn: Connection, *, limit: int) -> list[MissingVector]:
    """Up to `limit` searchable rows without a vector, session chunks first, oldest first;
    never an encrypted item (`choir.core.memory.sealed_items`: its text is a placeholder, and
    no vector is made of it)."""
    rows = await conn.fetch(_MISSING, limit)
    return [MissingVector(row["target"], row["id"], decode_text(row["text"])) for row in rows]


def _check_dims(target: VectorTarget, sizes: set[int], dims: int) -> None:
    """Refuse vectors whose sizes are not the column's (`dims`): the write stored none."""
    wrong = sizes - {dims}
    if wrong:
        raise VectorRefused(
            f"vectors of {sorted(wrong)[0]} dimensions refused: the agent's {target} embeddings "
            f"have {dims}; embed with the configured model"
        )


def _as_array(vector: npt.ArrayLike) -> Array:
    array = np.asarray(vector, dtype=np.float32)
    if array.ndim != 1:
        raise VectorRefused(f"a vector must be one-dimensional, not of shape {array.shape}")
    if not np.isfinite(array).all():
        raise VectorRefused("a vector holds NaN or infinity; the embedder's answer is broken")
    return array


def _as_uuid(ref: UUID | str) -> UUID:
    try:
        return ref if isinstance(ref, UUID) else UUID(ref)
    except ValueError:
        raise VectorRefused(f"{ref!r} is not a memory or knowledge row id (a UUID)") from None
