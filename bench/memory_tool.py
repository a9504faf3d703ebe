"""The memory query tool's round trip (`bench.memory`): agent -> choird -> Postgres -> agent.

choird runs in its own process with its embedded Postgres and the local embedder
(`bench.choird_server`); this process is agent-1: it says INIT_HELLO on its socket, stores
knowledge items with `choir.memory.upsert` (as a model's calls reach choird: EXECUTE_HOST_TOOL,
each call claimed and its result kept in Postgres), then times `choir.memory.query` calls — a
different question each, `semantic` (choird embeds the question, then HNSW search) and `hybrid`
(text and vector lists fused) — from send to answer.

- memory_query_tool_p50_ms: the median of those round trips (goal <= 15).
- memory_query_tool_p99_ms: their 99th percentile.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Final

from bench.choird_server import choird_server, hello_agent
from bench.common import percentile
from choir.agent.replication.control_plane import ControlPlane
from choir.protocol import ExecuteHostToolRequest

CONFIG: Final = {"rpc": {"rate_limit_per_s": 1_000_000}}
"""Back-to-back calls would trip the per-session rate limit, which is not measured here."""
QUESTIONS: Final = (
    "which editor does the user prefer",
    "when is the release meeting",
    "what failed in the parser tests",
    "where is the retry loop defined",
    "how does the user want answers",
    "what is the deploy host",
)
_calls = itertools.count(1)


async def tool(agent: ControlPlane, name: str, **arguments: Any) -> dict[str, Any]:
    request = ExecuteHostToolRequest(
        tool_name=name, call_id=f"bench-{next(_calls)}", input=arguments
    )
    output: dict[str, Any] = (await agent.execute_host_tool(request)).output
    if output.get("status") != "success":
        raise RuntimeError(f"{name} failed: {output.get('summary')}")
    return output


async def query_figures(notes: list[str], queries: int) -> dict[str, float]:
    """Store `notes` as knowledge, then time `queries` memory queries (half semantic, half
    hybrid) after a few unmeasured ones (the embedder's first use loads its model)."""
    async with choird_server(CONFIG) as server:
        agent = await hello_agent(server)
        try:
            for note in notes:
                await tool(agent, "choir.memory.upsert", op="add", text=note)
            samples = []
            for n in range(queries + 10):
                question = f"{QUESTIONS[n % len(QUESTIONS)]} ({n})"
                mode = "semantic" if n % 2 else "hybrid"
                began = time.perf_counter()
                await tool(
                    agent, "choir.memory.query", store="knowledge", mode=mode, query=question
                )
                if n >= 10:
                    samples.append((time.perf_counter() - began) * 1000)
        finally:
            await agent.close()
    return {
        "memory_query_tool_p50_ms": percentile(samples, 50),
        "memory_query_tool_p99_ms": percentile(samples, 99),
    }
