"""`run_as_agent` opens its transaction in the same round trip as the role: whatever ends the
block — success, an error inside, an agent without a schema — the connection goes back to the
pool outside any transaction, as choird's admin, with nothing of a failed block kept."""

from __future__ import annotations

import asyncpg
import pytest

from choir.errors import NotFoundError
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.idents import agent_role
from choir.store.postgres.pool import Connection, Pool


async def test_a_block_commits_as_the_agent_and_leaves_the_admin(pool: Pool, ada: str) -> None:
    async with pool.acquire() as conn:
        admin = await conn.fetchval("SELECT current_user")
        async with run_as_agent(conn, ada, ef_search=77) as agent:
            inside = await agent.fetchrow(
                "SELECT current_user AS role, current_setting('hnsw.ef_search') AS ef"
            )
            await agent.execute(
                "INSERT INTO knowledge_documents (name, text) VALUES ('kept', 'kept')"
            )
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT current_user") == admin
        assert (inside["role"], inside["ef"]) == (agent_role(ada), "77")
        async with run_as_agent(conn, ada) as agent:
            assert await agent.fetchval("SELECT count(*) FROM knowledge_documents") == 1


async def _write_then(conn: Connection, agent_id: str, statement: str) -> None:
    async with run_as_agent(conn, agent_id) as agent:
        await agent.execute("INSERT INTO knowledge_documents (name, text) VALUES ('lost', 'lost')")
        if statement:
            await agent.execute(statement)  # the server aborts the transaction
        raise RuntimeError("boom")


async def test_an_error_inside_rolls_the_block_back(pool: Pool, ada: str) -> None:
    async with pool.acquire() as conn:
        with pytest.raises(RuntimeError, match="boom"):
            await _write_then(conn, ada, "")
        assert not conn.is_in_transaction()
        with pytest.raises(asyncpg.PostgresSyntaxError):
            await _write_then(conn, ada, "SELEC 1")
        assert not conn.is_in_transaction()
        async with run_as_agent(conn, ada) as agent:
            assert await agent.fetchval("SELECT count(*) FROM knowledge_documents") == 0


async def test_an_agent_without_a_schema_leaves_no_transaction_open(pool: Pool) -> None:
    async with pool.acquire() as conn:
        with pytest.raises(NotFoundError, match="agent ghost has no memory schema"):
            async with run_as_agent(conn, "ghost"):
                pass
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT 1") == 1
