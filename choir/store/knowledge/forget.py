"""Operator curation of knowledge (issue 15): what an agent learnt from a user, and forgetting.

    items = await learnt_from(conn, "ops", limit=100)      # provenance: a session with DM ops
    gone = await forget(conn, "user.phone", by="choirctl")  # None: no such item

What an agent learnt from a user is every item one of whose versions an agent's session with
that user (its DM, `choir.core.memory.knowledge.provenance`) wrote — even if the operator
rewrote it since — and every item that user owns: personal items, and what choird derived from
that user's sessions (archives, tool sequences, session summaries, roll-ups), each then
forgettable.

Forgetting is one statement in the caller's transaction (`run_as_agent`): the item row goes,
and with it (ON DELETE CASCADE) its names and aliases, every version, its vector, its edges and
its use counts; the term-change trigger logs the removal, so every BM25 index drops it at its
next read. In the same transaction a `knowledge_forgotten` row records who forgot it and when —
by id only. A forget killed at any point has done all of it or none (tests/faults). The
session event log, the audit record, is not touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from choir.errors import UsageError
from choir.failpoints import failpoint
from choir.store.knowledge.items import COLUMNS, KnowledgeItem, item_of, resolve
from choir.store.postgres.pool import Connection

ABOUT_MAX: Final = 1000
"""Most items one `learnt_from` answer lists."""

_LEARNT: Final = f"""
SELECT {COLUMNS} FROM knowledge_documents d
WHERE d.owner_user = $1
   OR EXISTS (SELECT FROM knowledge_versions v
              WHERE v.document_id = d.id AND v.provenance ->> 'user' = $1)
ORDER BY d.created_at, d.id LIMIT $2
"""

_FORGET: Final = """
WITH gone AS (DELETE FROM knowledge_documents WHERE id = $1 RETURNING id, version)
INSERT INTO knowledge_forgotten (document_id, by, versions)
SELECT id, $2, version FROM gone
RETURNING document_id, forgotten_at, versions
"""


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What a forget removed."""

    id: UUID
    versions: int
    forgotten_at: datetime


async def learnt_from(conn: Connection, user: str, *, limit: int) -> list[KnowledgeItem]:
    """Items a session with `user` (a DM name) wrote a version of, or `user` owns, oldest
    first."""
    if not 1 <= limit <= ABOUT_MAX:
        raise UsageError(f"a memory about page lists 1 to {ABOUT_MAX} items, not {limit}")
    return [item_of(row) for row in await conn.fetch(_LEARNT, user, limit)]


async def forget(conn: Connection, ref: UUID | str, *, by: str) -> Forgotten | None:
    """Remove the item `ref` names from every table of the agent's memory and record that `by`
    forgot it; None when no item answers to `ref`."""
    item_id = await resolve(conn, ref)
    if item_id is None:
        return None
    await failpoint("memory.forget.before_delete")
    row = await conn.fetchrow(_FORGET, item_id, by)
    if row is None:  # removed by a concurrent forget or delete since it was resolved
        return None
    await failpoint("memory.forget.after_delete")
    return Forgotten(row["document_id"], row["versions"], row["forgotten_at"])
