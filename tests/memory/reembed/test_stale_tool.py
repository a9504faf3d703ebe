"""The agent's own memory tool on a stale agent, and a re-embed with the local model: a real
choird (in this process, the local embedder) whose agent-1 holds vectors of another 256-dim
model. `choir.memory.query` in semantic mode answers by text and says why; after the re-embed
(choird's `Reembedder`, as the operator verb runs it) it answers by the local model's vectors."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from choir.protocol import ExecuteHostToolRequest
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.memory.embedding_model import EmbeddingModel
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.e2e.agent_side import hello
from tests.harness.daemons import agent_control_plane, running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.memory.reembed.support import AGENT

pytestmark = pytest.mark.slow

NOTES = ("the deploy host is castor", "lunch is served at noon", "backups run nightly")


async def test_a_stale_agents_semantic_query_runs_as_text_until_reembedded(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))  # the local model, 256 dims
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, 256, "another-256-model")
        async with run_as_agent(conn, AGENT) as agent:
            for n, text in enumerate(NOTES):
                doc = await agent.fetchval(
                    "INSERT INTO knowledge_documents (name, text) VALUES ($1, $1) RETURNING id",
                    text,
                )
                vector = [0.0] * 256
                vector[n] = 1.0
                await agent.execute("INSERT INTO knowledge_embeddings VALUES ($1, $2)", doc, vector)
    finally:
        await conn.close()
    calls = itertools.count(1)
    async with running_daemon(home) as daemon:
        assert daemon.vector_models is not None
        assert daemon.vector_models.stored(AGENT) == EmbeddingModel("another-256-model", 256)
        assert daemon.services is not None
        started = await daemon.services.sessions.start(AGENT, {})
        plane = await agent_control_plane(
            daemon, "uds", started.session_id, started.lease_token, agent_id=AGENT
        )
        await plane.init_hello(hello(AGENT, started.session_id))

        async def query(**arguments: Any) -> dict[str, Any]:
            request = ExecuteHostToolRequest(
                tool_name="choir.memory.query", call_id=f"c{next(calls)}", input=arguments
            )
            output: dict[str, Any] = (await plane.execute_host_tool(request)).output
            assert output["status"] == "success", output
            return output

        stale = await query(store="knowledge", mode="semantic", query="deploy host")
        assert stale["data"]["mode"] == "text"
        assert "another embedding model's until re-embedded" in stale["summary"]
        assert [h["text"] for h in stale["data"]["hits"]] == [NOTES[0]]

        await daemon.memory_started()
        assert daemon.memory_reembed is not None
        seen: list[tuple[int, int]] = []

        async def progress(done: int, total: int) -> None:
            seen.append((done, total))

        run = await daemon.memory_reembed.run(AGENT, missing_only=False, progress=progress)
        assert (run.previous, run.model) == (
            EmbeddingModel("another-256-model", 256),
            EmbeddingModel("local", 256),
        )
        assert run.embedded == len(NOTES)
        assert seen[-1] == (len(NOTES), len(NOTES))

        found = await query(store="knowledge", mode="semantic", query="deploy host")
        assert found["data"]["mode"] == "semantic"
        assert found["data"]["hits"][0]["text"] == NOTES[0]  # by the local model's vectors
        await plane.close()
