"""Whether memory has work waiting, asked without loading the vector stack (numpy, pgvector).

choird's memory (store, closer, index) costs ~12 MB and a few Postgres connections once loaded;
at start it is loaded only when this says there is something to do: an ended session not yet
put into memory, or a searchable row still without its vector. Otherwise it waits for the first
memory work (a session ending, a memory tool call).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from choir.errors import NotFoundError
from choir.store.agent_schema import run_as_agent
from choir.store.memory.closes import pending_closes
from choir.store.postgres.pool import Connection

_UNEMBEDDED: Final = """
SELECT EXISTS (SELECT FROM memory_documents d
               WHERE d.tier IN ('mid_term', 'long_term_summary')
                 AND NOT EXISTS (SELECT FROM memory_embeddings e WHERE e.document_id = d.id))
    OR EXISTS (SELECT FROM knowledge_documents d
               WHERE NOT EXISTS (SELECT FROM knowledge_embeddings e WHERE e.document_id = d.id))
"""


async def memory_work_waiting(conn: Connection, agents: Collection[str]) -> bool:
    """True when a session of `agents` awaits its close or one of their rows its vector."""
    if await pending_closes(conn, agents, limit=1):
        return True
    for agent_id in agents:
        try:
            async with run_as_agent(conn, agent_id) as agent:
                if await agent.fetchval(_UNEMBEDDED):
                    return True
        except NotFoundError:  # added by `config apply`: no schema (so no memory) until restart
            continue
    return False


async def knowledge_exists(conn: Connection, agent_id: str) -> bool:
    """Whether `agent_id` has any knowledge item: a recall with none has nothing to rank, and
    needs neither choird's memory nor the embedder loaded to say so."""
    async with run_as_agent(conn, agent_id) as agent:
        return bool(await agent.fetchval("SELECT EXISTS (SELECT FROM knowledge_documents)"))
