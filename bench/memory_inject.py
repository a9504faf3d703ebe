"""`context_injection_ms_p50` / `_p99` of `bench.memory`: from a user message to its recalled
memories ready to show (design 004, relevant context each turn), over `bench.memory_bm25`'s
100k knowledge items.

Each sample is what choird and edge do for one message, in this process: choird's
`choir.memory.recall` handler (arguments checked, the message embedded by the local model,
relevance over BM25 and vector candidates, matches only, what the agent may read, the 2,000-token
budget filled, the chosen items' access counted in the search's transaction), then edge's
`MemoryRecalled` event made from the answer and the prompt's memory block rendered from it. The
corpus' vectors are 3-dim, so the 256-dim vector the local model makes is timed but the search
gets the corpus' own query vector. Not in it: the agent -> choird socket hop (one
EXECUTE_HOST_TOOL round trip; `memory_query_tool_p50_ms` measures that hop with a search).
`context_injection_cpu_ms` is the mean CPU time of one, this process and its Postgres backend:
what a loaded machine does not inflate.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.common import percentile
from choir.core.memory.recall import DEFAULT_BUDGET_TOKENS, recall_block
from choir.daemon.agents.host_tools import HostToolCall
from choir.daemon.memory.access import MemoryGate
from choir.daemon.memory.embedding.local_provider import LocalEmbeddings
from choir.daemon.memory.store import PostgresMemoryStore
from choir.daemon.memory.tools.recall import MemoryRecall
from choir.daemon.sessions.state import LiveSession
from choir.protocol import MemoryRecalled, RecalledItem, ResourceBindings

Vector = npt.NDArray[np.float32]


async def injection_figures(
    store: PostgresMemoryStore,
    agent_id: str,
    asked: list[str],
    vector: Callable[[str], Vector],
    cpu_s: Callable[[], float],
) -> dict[str, float]:
    """The figures; `cpu_s` reads this process' and its Postgres backend's CPU seconds."""
    embedder = LocalEmbeddings()
    await embedder.load()

    async def parts() -> tuple[PostgresMemoryStore, Any]:
        return store, None

    async def embed(text: str, timeout_s: float | None = None, **_: Any) -> Vector:
        await embedder.embed([text])  # what choird pays; the corpus needs its 3-dim vector
        return vector(text)

    gate = MemoryGate(dict)  # an agent with no `memories` entry: its own, as by default
    recall = MemoryRecall(
        parts,
        embed,
        current=lambda agent: True,
        scope=lambda agent, user: gate.scope(agent, agent, user=user),
    )
    bindings = ResourceBindings(workspace="ws", llm="demo", dm="console")
    live = LiveSession("bench", agent_id, "hash", bindings, False, 0, "genesis", None)
    context, ids = live.context("token"), itertools.count()
    found: list[int] = []

    async def inject(text: str) -> None:
        arguments = {"text": text, "budget_tokens": DEFAULT_BUDGET_TOKENS, "deadline_ms": 60_000}
        result = await recall(HostToolCall(context, f"recall-{next(ids)}", arguments))
        assert result.status == "success", result.summary
        items = [RecalledItem.model_validate(item) for item in result.data["items"]]
        event = MemoryRecalled(items=items, budget_tokens=DEFAULT_BUDGET_TOKENS)
        recall_block(event)
        found.append(len(items))

    for text in asked[:20]:  # warm the caches and the prepared statements
        await inject(text)
    samples = []
    cpu_started = cpu_s()
    for text in asked:
        started = time.perf_counter()
        await inject(text)
        samples.append((time.perf_counter() - started) * 1000)
    cpu_ms = (cpu_s() - cpu_started) * 1000 / len(samples)
    return {
        "context_injection_ms_p50": percentile(samples, 50),
        "context_injection_ms_p99": percentile(samples, 99),
        "context_injection_cpu_ms": cpu_ms,
        "context_injection_items": sum(found[20:]) / len(samples),
    }
