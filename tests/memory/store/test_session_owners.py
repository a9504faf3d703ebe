"""Session-derived memory is its session's user's (real Postgres): roll-ups grouped per user,
a roll-up owned by the one user of its summaries and linked to those only, and agent migration
13 backfilling the users of what was stored before."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

from choir.core.memory.summaries.archives import ArchiveEntry
from choir.core.memory.summaries.rollup import rollup_entry
from choir.daemon.memory.closing.archives import store_entries, store_session_branch
from choir.daemon.memory.closing.chunks import StoredSession
from choir.daemon.memory.store import PostgresMemoryStore
from choir.protocol.log.events import MemoryRollup, SessionSummary
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.postgres.ddl import AGENT_MIGRATIONS, apply_migrations
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.conftest import DIMS

BEFORE_OWNERS = 12
"""The last agent migration before session-derived memory had a user."""


def unindexed(agent_id: str, target: Any, item_id: UUID, text: str) -> None:
    """No vectors here: these tests read by name."""


async def summarized(store: PostgresMemoryStore, agent_id: str, user: str) -> str:
    """A closed session of `user` ("": none) with a summary stored; the summary's name."""
    session_id = f"s-{uuid.uuid4().hex[:16]}"
    summary = SessionSummary(summary=f"A session with {user or 'nobody'}.")
    stored = StoredSession(session_id, [], summary, user=user)
    assert await store_session_branch(store, unindexed, agent_id, stored)
    return f"summary/{session_id.removeprefix('s-')}"


def rollup(minute: int, covers: list[str]) -> ArchiveEntry:
    event = MemoryRollup(name=f"rollup/2026-11-27T14:{minute:02d}Z", text="Rolled.", covers=covers)
    return rollup_entry("s-roller", 5, event)


async def pending(store: PostgresMemoryStore, agent_id: str, user: str) -> list[str]:
    return [p.name for p in await store.pending_summaries(agent_id, 20, user=user)]


async def derived_from(store: PostgresMemoryStore, agent_id: str, name: str) -> list[str]:
    _, found = await store.knowledge_neighbours(agent_id, name)
    return [n.item.name for n in found if n.edge.direction == "out"]


async def test_rollups_are_grouped_per_user_and_owned_by_that_user(
    store: PostgresMemoryStore, ada: str
) -> None:
    alice = await summarized(store, ada, "alice")
    bob = await summarized(store, ada, "bob")
    nobody = await summarized(store, ada, "")
    assert (await store.get_knowledge(ada, alice)).owner_user == "alice"
    assert (await store.get_knowledge(ada, nobody)).owner_user == ""

    # one user's at a time; a user with none pending gets those of no user, as their own group
    assert await pending(store, ada, "alice") == [alice]
    assert await pending(store, ada, "bob") == [bob]
    assert await pending(store, ada, "carol") == [nobody]
    assert await pending(store, ada, "") == [nobody]

    # written in alice's session over her summary: hers, linked to it
    assert await store_entries(store, unindexed, ada, [rollup(1, [alice])], owner="alice") == 1
    root = await store.get_knowledge(ada, "rollup/2026-11-27T14:01Z")
    assert (root.memory_class, root.owner_user) == ("knowledge", "alice")
    assert await derived_from(store, ada, root.name) == [alice]
    assert await pending(store, ada, "alice") == [nobody]  # hers are covered: no user's next

    # written in alice's session over the summaries of no user: nobody's, as they are
    assert await store_entries(store, unindexed, ada, [rollup(2, [nobody])], owner="alice") == 1
    assert (await store.get_knowledge(ada, "rollup/2026-11-27T14:02Z")).owner_user == ""

    # one not made by choir's roll-up, over two users': its session's user's, linked to theirs
    assert await store_entries(store, unindexed, ada, [rollup(3, [alice, bob])], owner="bob") == 1
    mixed = await store.get_knowledge(ada, "rollup/2026-11-27T14:03Z")
    assert mixed.owner_user == "bob"
    assert await derived_from(store, ada, mixed.name) == [bob]


async def test_a_summary_stored_after_its_rollup_is_linked_to_its_own_users_only(
    store: PostgresMemoryStore, ada: str
) -> None:
    session_id = f"s-{uuid.uuid4().hex[:16]}"
    name = f"summary/{session_id.removeprefix('s-')}"
    await store_entries(store, unindexed, ada, [rollup(4, [name])], owner="bob")
    await store_entries(store, unindexed, ada, [rollup(5, [name])], owner="alice")
    summary = SessionSummary(summary="Late.")
    await store_session_branch(
        store, unindexed, ada, StoredSession(session_id, [], summary, user="alice")
    )
    _, found = await store.knowledge_neighbours(ada, name)
    assert [(n.item.name, n.edge.direction) for n in found] == [("rollup/2026-11-27T14:05Z", "in")]


async def test_migration_13_gives_what_was_derived_from_a_session_its_user(pool: Pool) -> None:
    agent_id = f"old-{uuid.uuid4().hex[:8]}"
    schema = quote_ident(agent_schema(agent_id))
    tag = uuid.uuid4().hex[:8]
    sessions = {"alice": f"s-a{tag}", "bob": f"s-b{tag}", "": f"s-n{tag}"}
    items: dict[str, tuple[str, dict[str, Any]]] = {
        "archive-a": ("a", {"compaction_archive": {"session_id": sessions["alice"]}}),
        "summary-a": ("a", {"session_summary": {"session_id": sessions["alice"]}}),
        "summary-b": ("b", {"session_summary": {"session_id": sessions["bob"]}}),
        "tools-n": ("n", {"tool_sequence": {"session_id": sessions[""]}}),
        "rollup-a": ("r", {"memory_rollup": {"covers": ["summary-a"]}}),
        "rollup-ab": ("r", {"memory_rollup": {"covers": ["summary-a", "summary-b"]}}),
        "note": ("x", {}),
    }
    async with pool.acquire() as conn:
        await apply_migrations(
            conn, f"agent:{agent_id}", AGENT_MIGRATIONS[:BEFORE_OWNERS], schema=schema, dims=DIMS
        )
        await conn.execute(
            "INSERT INTO choir_control.agents (agent_id, name) VALUES ($1, $1)", agent_id
        )
        for user, session_id in sessions.items():
            await conn.execute(
                "INSERT INTO choir_control.sessions (session_id, agent_id, status, "
                "resource_bindings) VALUES ($1, $2, 'stopped', $3)",
                session_id,
                agent_id,
                {"dm": user} if user else {},
            )
            await conn.execute(
                f"INSERT INTO {schema}.memory_documents (session_id, tier, chunk_index, text) "
                "VALUES ($1, 'mid_term', 0, 'words')",
                session_id,
            )
        for name, (text, metadata) in items.items():
            await conn.execute(
                f"INSERT INTO {schema}.knowledge_documents (name, text, metadata) "
                "VALUES ($1, $2, $3)",
                name,
                text,
                metadata,
            )
        await ensure_agent_schema(conn, agent_id, DIMS)  # choird's next start: migration 13
        async with run_as_agent(conn, agent_id) as agent:
            rows = await agent.fetch("SELECT session_id, owner_user FROM memory_documents")
            owners = {row["session_id"]: row["owner_user"] for row in rows}
            kept = await agent.fetch(
                "SELECT name, memory_class, owner_user FROM knowledge_documents"
            )
    assert owners == {session_id: user for user, session_id in sessions.items()}
    assert {row["name"]: row["owner_user"] for row in kept} == {
        "archive-a": "alice",
        "summary-a": "alice",
        "summary-b": "bob",
        "tools-n": "",
        "rollup-a": "alice",  # its summaries' one user; the one over two users' is gone
        "note": "",
    }
    assert {row["memory_class"] for row in kept} == {"knowledge"}
