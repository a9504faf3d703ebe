"""`choir_control.session_artifacts`: the whole of events committed as previews (§13.1).

An agent uploads an artifact in chunks before the heartbeat whose event names it. Chunks are kept
only in order — one that does not start where the stored bytes end changes nothing, and the
answer says where to go on — so resends and lost replies are harmless. The last chunk is checked
against the digest in the same statement that stores it (Postgres's own `sha256`); a mismatch
stores nothing and is refused. A complete artifact never changes again.

The event that references an artifact records the reference in `session_events.artifact`, set
in the heartbeat's transaction (`link_artifacts`), so a stored event and its artifact are durable
together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from choir.errors import ConflictError
from choir.store.postgres.pool import Connection

ARTIFACT_MAX_BYTES: Final = 64 * 1024 * 1024
"""Largest artifact stored: far above any model reply or tool output, and a bound on what one
agent can make choird keep."""

_CLAIM: Final = """
INSERT INTO choir_control.session_artifacts (session_id, sha256, size) VALUES ($1, $2, $3)
ON CONFLICT (session_id, sha256) DO NOTHING
"""

_STATE: Final = """
SELECT size, length(content) AS stored, complete FROM choir_control.session_artifacts
WHERE session_id = $1 AND sha256 = $2
FOR UPDATE
"""

_APPEND: Final = """
UPDATE choir_control.session_artifacts
SET content = content || $3,
    complete = (length(content || $3) = size AND encode(sha256(content || $3), 'hex') = sha256)
WHERE session_id = $1 AND sha256 = $2
RETURNING length(content) AS stored, complete
"""

_READ: Final = """
SELECT size, substring(content FROM $3 + 1 FOR $4) AS data FROM choir_control.session_artifacts
WHERE session_id = $1 AND sha256 = $2 AND complete
"""

_COMPLETE: Final = """
SELECT sha256 FROM choir_control.session_artifacts
WHERE session_id = $1 AND sha256 = ANY($2::text[]) AND complete
"""

_LINK: Final = """
UPDATE choir_control.session_events AS e SET artifact = link.ref
FROM unnest($2::bigint[], $3::jsonb[]) AS link (rev, ref)
WHERE e.session_id = $1 AND e.rev = link.rev
"""

_REFS: Final = """
SELECT rev, artifact FROM choir_control.session_events
WHERE session_id = $1 AND rev = ANY($2::bigint[]) AND artifact IS NOT NULL
"""


class Stored(NamedTuple):
    """How much of an artifact choird holds after a chunk."""

    stored: int
    complete: bool


class ArtifactMismatch(ConflictError):
    """The assembled bytes of an artifact do not match its digest."""


async def put_chunk(
    conn: Connection, session_id: str, sha256: str, size: int, offset: int, data: bytes
) -> Stored:
    """Store `data` at `offset` of the session's artifact `sha256` (of `size` bytes) if it
    continues what is stored; what is stored afterwards. Run inside a transaction."""
    await conn.execute(_CLAIM, session_id, sha256, size)
    row = await conn.fetchrow(_STATE, session_id, sha256)
    assert row is not None
    if row["size"] != size:
        raise ConflictError(
            f"artifact {sha256} was announced with {row['size']} bytes, now with {size}"
        )
    if row["complete"] or offset != row["stored"] or not data:
        return Stored(row["stored"], row["complete"])
    if row["stored"] + len(data) > size:
        raise ConflictError(f"artifact {sha256}: chunk at {offset} runs past its {size} bytes")
    appended = await conn.fetchrow(_APPEND, session_id, sha256, data)
    assert appended is not None
    if appended["stored"] == size and not appended["complete"]:
        raise ArtifactMismatch(f"artifact {sha256}: its {size} bytes do not match its digest")
    return Stored(appended["stored"], appended["complete"])


async def read_chunk(
    conn: Connection, session_id: str, sha256: str, offset: int, length: int
) -> tuple[int, bytes] | None:
    """(the artifact's size, up to `length` bytes from `offset`), or None if the session holds
    no complete artifact `sha256`."""
    row = await conn.fetchrow(_READ, session_id, sha256, offset, length)
    return None if row is None else (int(row["size"]), bytes(row["data"]))


async def complete_artifacts(conn: Connection, session_id: str, shas: Iterable[str]) -> set[str]:
    """Which of `shas` the session holds whole and verified."""
    wanted = sorted(set(shas))
    if not wanted:
        return set()
    return {row["sha256"] for row in await conn.fetch(_COMPLETE, session_id, wanted)}


async def link_artifacts(
    conn: Connection, session_id: str, refs: Sequence[tuple[int, dict[str, Any]]]
) -> None:
    """Record on the stored events (rev, `{"sha256", "size"}`) which artifact each previews."""
    if refs:
        await conn.execute(_LINK, session_id, [r for r, _ in refs], [ref for _, ref in refs])


async def artifact_refs(
    conn: Connection, session_id: str, revs: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """The artifact references of those of `revs` that preview a larger event."""
    if not revs:
        return {}
    rows = await conn.fetch(_REFS, session_id, list(revs))
    return {int(row["rev"]): dict(row["artifact"]) for row in rows}


__all__ = [
    "ARTIFACT_MAX_BYTES",
    "ArtifactMismatch",
    "Stored",
    "artifact_refs",
    "complete_artifacts",
    "link_artifacts",
    "put_chunk",
    "read_chunk",
]
