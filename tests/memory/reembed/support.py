"""A home whose agent-1 has memory to re-embed, choird as a real process, and what its memory
holds read back (each searchable row with its vector's size, the recorded model)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from choir.config.scaffolding.gitrepo import git
from choir.home import ChoirHome
from choir.store.agent_schema import ensure_agent_schema, run_as_agent
from choir.store.memory.embedding_model import EmbeddingModel, stored_embedding_model
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, connect
from choir.store.postgres.target import ConnectParams
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import Choird, run_choirctl
from tests.memory.close.support import conversation, store_ended_session
from tests.memory.embeddings_server import EmbeddingsServer

AGENT = "agent-1"
PROBE = "choir memory re-embed: is the embedder answering?"


def use_model(home: ChoirHome, url: str, model: str, dims: int) -> None:
    """config.json's embedding: `model` at `dims` from the test server at `url`."""
    data: dict[str, Any] = read_config(home)
    data["embedding"] = {
        "provider": "test-server",
        "endpoint": url,
        "model": model,
        "dimensions": dims,
    }
    write_config(home, data)


async def seeded_home(
    root: Path, pg_params: ConnectParams, url: str, *, knowledge: int, model: str, dims: int
) -> ChoirHome:
    """A home on `pg_params` whose agent-1 holds `knowledge` items (no vectors yet) and one
    ended session for choird to close, configured for `model`."""
    home = make_home(root, postgres=external_postgres(pg_params))
    use_model(home, url, model, dims)
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        await ensure_agent_schema(conn, AGENT, dims, model)
        async with run_as_agent(conn, AGENT) as agent:
            await agent.execute(
                "INSERT INTO knowledge_documents (name, text) SELECT 'k' || n, "
                "'note ' || n || ': the deploy of service ' || n || ' runs at ' || (n % 24) "
                f"|| ' o''clock' FROM generate_series(1, {knowledge:d}) AS n"
            )
        await store_ended_session(conn, "s-seeded", conversation(0, turns=8))
    finally:
        await conn.close()
    return home


async def three_agents_home(
    root: Path, pg_params: ConnectParams, url: str, *, knowledge: int, model: str, dims: int
) -> ChoirHome:
    """A home on `pg_params` with agent-1, agent-2 and agent-3, each holding `knowledge`
    items (no vectors; each text starts with its agent's name) of `model` at `dims`, and no
    session: configure another model and every agent is stale (nothing re-embeds them at
    choird's start)."""
    home = make_home(root, postgres=external_postgres(pg_params))
    data: dict[str, Any] = read_config(home)
    repo = root / "repo-agent-3"
    git(root, "clone", "-q", data["agents"]["agent-1"]["repo"]["url"], str(repo))
    data["workspaces"]["third"] = {"path": str(root / "ws-third")}
    data["dms"]["ops3"] = {"gateway": "console", "user_id": "ops3"}
    data["git_identities"]["agent-3"] = {"name": "choir agent-3", "email": "agent-3@choir.local"}
    data["agents"]["agent-3"] = {
        "repo": {**data["agents"]["agent-1"]["repo"], "url": str(repo)},
        "defaults": {"workspace": "third", "llm": "demo", "git_identity": "agent-3", "dm": "ops3"},
    }
    write_config(home, data)
    use_model(home, url, model, dims)
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        for agent_id in AGENTS:
            await add_knowledge(conn, agent_id, knowledge, model=model, dims=dims)
    finally:
        await conn.close()
    return home


AGENTS = ("agent-1", "agent-2", "agent-3")


async def add_knowledge(
    conn: asyncpg.Connection, agent_id: str, count: int, *, model: str, dims: int, start: int = 1
) -> None:
    """`count` knowledge items of `agent_id` stored without a vector (as an outage leaves
    them), texts `<agent_id> fact <n>` from `start`."""
    await ensure_agent_schema(conn, agent_id, dims, model)
    async with run_as_agent(conn, agent_id) as agent:
        await agent.execute(
            f"INSERT INTO knowledge_documents (name, text) SELECT 'f' || n, "
            f"'{agent_id} fact ' || n || ': service ' || n || ' restarts nightly' "
            f"FROM generate_series({start:d}, {start + count - 1:d}) AS n"
        )


@dataclass(frozen=True)
class Memory:
    texts: list[str]
    """Every searchable row's text (mid-term chunks, summaries, knowledge)."""
    dims: list[int | None]
    """Each row's vector size, None without one."""
    model: EmbeddingModel | None

    @property
    def missing(self) -> int:
        return sum(1 for d in self.dims if d is None)


async def memory_of(pool: Pool, agent_id: str = AGENT) -> Memory:
    async with pool.acquire() as conn:
        model = await stored_embedding_model(conn, agent_id)
        async with run_as_agent(conn, agent_id) as agent:
            rows = await agent.fetch(
                "SELECT d.text, vector_dims(e.embedding) AS dims FROM memory_documents d "
                "LEFT JOIN memory_embeddings e ON e.document_id = d.id "
                "WHERE d.tier IN ('mid_term', 'long_term_summary') "
                "UNION ALL "
                "SELECT d.text, vector_dims(e.embedding) FROM knowledge_documents d "
                "LEFT JOIN knowledge_embeddings e ON e.document_id = d.id"
            )
    return Memory([r["text"] for r in rows], [r["dims"] for r in rows], model)


def embedded_texts(server: EmbeddingsServer, since: int = 0) -> Counter[str]:
    """How often each text was sent to the server in its requests from `since` on, the
    re-embed's probe left out."""
    return Counter(t for batch in server.batches[since:] for t in batch if t != PROBE)


def sent_of(server: EmbeddingsServer, agent_id: str, since: int) -> list[int]:
    """How often each of `agent_id`'s texts was sent to the server from request `since` on."""
    sent = embedded_texts(server, since)
    return [n for text, n in sent.items() if text.startswith(f"{agent_id} ")]


async def choirctl(home: ChoirHome, *args: str) -> subprocess.CompletedProcess[str]:
    """`choirctl args` in a thread: the test's event loop serves the embeddings meanwhile."""
    return await asyncio.to_thread(run_choirctl, home, *args)


def stop(choird: Choird | None) -> None:
    """SIGTERM and wait: choird stops gracefully."""
    if choird is None or choird.process.poll() is not None:
        return
    choird.process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        choird.process.wait(timeout=40)
    if choird.process.poll() is None:
        choird.process.kill()
        choird.process.wait(timeout=10)
