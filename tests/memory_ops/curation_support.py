"""What a test reads of one knowledge item in every table of an agent's memory (its row, names,
versions, vector, edges, use counts) and of the forgets recorded: to see an item wholly there
or wholly gone."""

from __future__ import annotations

from typing import Any

from choir.store.agent_schema import run_as_agent
from choir.store.postgres.pool import Pool

_TRACES = """
SELECT
  (SELECT count(*) FROM knowledge_documents WHERE id = $1) AS documents,
  (SELECT count(*) FROM knowledge_names WHERE document_id = $1) AS names,
  (SELECT count(*) FROM knowledge_versions WHERE document_id = $1) AS versions,
  (SELECT count(*) FROM knowledge_embeddings WHERE document_id = $1) AS vectors,
  (SELECT count(*) FROM knowledge_edges WHERE source_id = $1 OR target_id = $1) AS edges,
  (SELECT count(*) FROM knowledge_forgotten WHERE document_id = $1) AS forgotten
"""


async def traces(pool: Pool, agent_id: str, item_id: Any) -> dict[str, int]:
    """How many rows of each memory table hold item `item_id`, and its forget records."""
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        row = await agent.fetchrow(_TRACES, item_id)
    assert row is not None
    return dict(row)


async def forgets(pool: Pool, agent_id: str) -> list[dict[str, Any]]:
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        rows = await agent.fetch("SELECT document_id, by, versions FROM knowledge_forgotten")
    return [dict(row) for row in rows]
