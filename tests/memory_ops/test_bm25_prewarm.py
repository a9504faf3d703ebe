"""The BM25 index of an agent's knowledge is built when its session starts, in the background:
no knowledge search has run, yet the index is in choird's memory soon after the start (real
choird, real Postgres), and it ranks what was stored."""

from __future__ import annotations

from choir.daemon.memory.search.query import MemoryQuery
from tests.harness.waits import poll_until

from .conftest import Filled


async def test_a_session_start_builds_the_agents_bm25_index(filled: Filled) -> None:
    store = filled.store
    for number in range(50):
        await store.put_knowledge(
            "agent-2", f"note {number} about the deploy host", name=f"n{number}"
        )
    assert filled.daemon.services is not None
    built_before = store.bm25.built("agent-2")

    await filled.daemon.services.sessions.start("agent-2", {})
    await poll_until(lambda: store.bm25.built("agent-2"), within=30, every=0.05)
    found = await store.search(
        "agent-2", MemoryQuery(store="knowledge", mode="text", text="note 7", limit=3)
    )

    assert built_before is False
    assert found[0].source.name == "n7"
