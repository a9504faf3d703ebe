"""§23.0: the store works as the agent's role, which reaches nothing but its own schema."""

from __future__ import annotations

import asyncpg
import pytest

from choir.core.memory.chunks import Tier
from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.errors import NotFoundError
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.pool import Pool
from tests.memory.store.support import event_chunks


async def test_each_agent_sees_only_its_own_memory(
    store: PostgresMemoryStore, agents: tuple[str, str]
) -> None:
    ada, bob = agents
    await store.add_session_chunks(bob, "s1", Tier.MID_TERM, event_chunks(["bob's secret plan"]))
    await store.put_knowledge(bob, "bob's secret key location", name="secret")

    assert await store.search(ada, MemoryQuery(mode="text", text="secret")) == []
    assert await store.list_knowledge(ada, limit=10) == []
    assert await store.delete_knowledge(ada, "secret") is False
    assert len(await store.list_knowledge(bob, limit=10)) == 1


async def test_the_store_runs_as_the_agents_role_not_as_admin(
    store: PostgresMemoryStore, pool: Pool, ada: str
) -> None:
    # take the role's right away: admin could still write, so a refusal proves who wrote
    async with pool.acquire() as conn:
        await conn.execute(f'REVOKE INSERT ON "choir_{ada}".knowledge_documents FROM "choir_{ada}"')
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await store.put_knowledge(ada, "a note")


@pytest.mark.parametrize(
    "query",
    [
        'SELECT * FROM "choir_{other}".memory_documents',
        'SELECT * FROM "choir_{other}".knowledge_documents',
        "SELECT * FROM choir_control.sessions",
        "SELECT * FROM choir_control.session_events",
    ],
)
async def test_an_agents_role_cannot_read_another_agent_nor_the_control_plane(
    pool: Pool, agents: tuple[str, str], query: str
) -> None:
    ada, bob = agents
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with run_as_agent(conn, ada) as agent:
                await agent.fetch(query.format(other=bob))


async def test_an_agent_without_a_schema_is_not_found(store: PostgresMemoryStore) -> None:
    with pytest.raises(NotFoundError, match="agent nobody has no memory schema"):
        await store.search("nobody", MemoryQuery(mode="text", text="x"))
