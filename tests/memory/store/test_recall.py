"""`choir.memory.recall` on real Postgres (design 004, relevant context each turn): the items
that match the message, best first, within the token budget, only those counted as used; a
search stuck on a lock is given up at its deadline with nothing counted; memory that is not up
is an error answer, never an exception."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from choir.core.memory.knowledge.graph import ItemFields, Placement
from choir.core.memory.knowledge.relevance import RelevanceWeights
from choir.daemon.agents.host_tools import HostToolCall
from choir.daemon.memory.access import MemoryGate
from choir.daemon.memory.search.prewarm import Bm25Prewarm
from choir.daemon.memory.store import PostgresMemoryStore
from choir.daemon.memory.tools.recall import TIMEOUT, MemoryRecall
from choir.daemon.sessions.state import LiveSession
from choir.errors import UnavailableError
from choir.protocol import ResourceBindings, ToolResult
from choir.store.memory.work import knowledge_exists
from choir.store.postgres.idents import agent_schema, quote_ident
from choir.store.postgres.pool import Pool
from tests.memory.store.test_relevance import access, fill


def _call(
    agent_id: str, text: str, budget: int = 2_000, deadline_ms: int = 5_000, dm: str = "console"
) -> HostToolCall:
    bindings = ResourceBindings(workspace="ws", llm="demo", dm=dm)
    live = LiveSession("s-1", agent_id, "hash", bindings, False, 0, "genesis", None)
    arguments = {"text": text, "budget_tokens": budget, "deadline_ms": deadline_ms}
    return HostToolCall(live.context("token"), "recall-1", arguments)


def _recall(store: PostgresMemoryStore) -> MemoryRecall:
    async def parts() -> tuple[PostgresMemoryStore, Any]:
        return store, None

    async def no_vector(*_: Any, **__: Any) -> None:
        raise AssertionError("the 3-dim test vectors are not the embedder's: never asked")

    gate = MemoryGate(dict)  # agents without `memories`: their own memories, by default
    return MemoryRecall(
        parts,
        no_vector,
        current=lambda agent_id: False,
        scope=lambda agent, user: gate.scope(agent, agent, user=user),
    )


def _names(result: ToolResult) -> list[str]:
    return [item["name"] for item in result.data["items"]]


async def test_matching_items_within_the_budget_and_only_those_count_as_used(
    pool: Pool, ada: str
) -> None:
    store = PostgresMemoryStore(pool, weights=lambda: RelevanceWeights(0, 0, 0, 1))
    await fill(store, ada)
    recall = _recall(store)

    result = await recall(_call(ada, "which host do deploys use?"))
    assert result.status == "success", result.summary
    # importance orders the matches; the printer note shares no word with the message
    assert _names(result) == ["host.fix", "host.pref", "host.fact", "host.task"]
    assert result.data["tokens"] == sum(item["tokens"] for item in result.data["items"])
    assert (await access(pool, ada)) == {
        "host.fix": 1, "host.pref": 1, "host.fact": 1, "host.task": 1, "office": 0
    }  # fmt: skip

    first = result.data["items"][0]["tokens"]
    small = await recall(_call(ada, "which host do deploys use?", budget=first))
    assert _names(small) == ["host.fix"]
    assert small.data["tokens"] <= first
    assert (await access(pool, ada))["host.fix"] == 2
    assert (await access(pool, ada))["host.pref"] == 1

    unrelated = await recall(_call(ada, "good morning, how are you today"))
    assert unrelated.status == "success"
    assert unrelated.data["items"] == []


async def test_a_personal_item_is_recalled_for_its_user_only(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool)
    mine = ItemFields(memory=Placement("personal", "phone"))
    await store.add_knowledge(ada, "the deploy host is kestrel", name="host.mine", fields=mine)
    recall = _recall(store)

    theirs = await recall(_call(ada, "which deploy host?", dm="console"))
    own = await recall(_call(ada, "which deploy host?", dm="phone"))

    assert theirs.status == own.status == "success"
    assert _names(theirs) == []  # another user's: never in this user's prompt
    assert _names(own) == ["host.mine"]
    assert (await access(pool, ada)) == {"host.mine": 1}


async def test_a_search_stuck_past_its_deadline_is_given_up_and_counts_nothing(
    pool: Pool, ada: str
) -> None:
    store = PostgresMemoryStore(pool)
    await fill(store, ada)
    schema = quote_ident(agent_schema(ada))
    async with pool.acquire() as admin:
        blocker = admin.transaction()
        await blocker.start()
        await admin.execute(f"LOCK TABLE {schema}.knowledge_documents IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        result = await _recall(store)(_call(ada, "deploy host", deadline_ms=150))
        took = time.monotonic() - started
        await blocker.rollback()
    assert result.status == "error"
    assert result.error_code == TIMEOUT
    assert "deadline" in result.summary
    assert took < 2.0  # given up near 150 ms, not when the lock went
    assert set((await access(pool, ada)).values()) == {0}


async def test_memory_not_up_and_bad_arguments_are_error_answers(pool: Pool, ada: str) -> None:
    async def down() -> tuple[PostgresMemoryStore, Any]:
        raise UnavailableError("choird's memory has not started yet")

    async def no_vector(*_: Any, **__: Any) -> None:
        return None

    gate = MemoryGate(dict)
    recall = MemoryRecall(
        down,
        no_vector,
        current=lambda agent_id: True,
        scope=lambda agent, user: gate.scope(agent, agent, user=user),
    )
    result = await recall(_call(ada, "deploy host"))
    assert (result.status, result.error_code) == ("error", "memory_unavailable")
    assert "not started" in result.summary
    bad = await recall(HostToolCall(_call(ada, "x").context, "r", {"text": 3}))
    assert (bad.status, bad.error_code) == ("error", "invalid_input")
    off = await asyncio.wait_for(recall(_call(ada, "deploy host", budget=0)), 1)
    assert off.data["items"] == []


async def test_a_warm_up_loads_without_recalling_or_counting_anything(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool)
    await fill(store, ada)
    warm = HostToolCall(_call(ada, "").context, "warm-1", {**_call(ada, "").input, "warm": True})
    result = await _recall(store)(warm)
    assert result.status == "success", result.summary
    assert result.data["items"] == []
    assert set((await access(pool, ada)).values()) == {0}
    found = await _recall(store)(_call(ada, "deploy host"))  # the index the warm-up built
    assert "host.fact" in _names(found)


async def test_an_agent_without_knowledge_loads_nothing_until_it_has_some(
    pool: Pool, ada: str
) -> None:
    """No knowledge: the warm-up and a recall answer from one query, without memory's store or
    the embedder; once an item exists, both run in full and the agent is not asked again."""
    store = PostgresMemoryStore(pool, weights=lambda: RelevanceWeights(0, 0, 0, 1))
    asked: list[str] = []
    loaded: list[str] = []

    async def exists(agent_id: str) -> bool:
        asked.append(agent_id)
        async with pool.acquire() as conn:
            return await knowledge_exists(conn, agent_id)

    async def parts() -> tuple[PostgresMemoryStore, Any]:
        loaded.append("memory")
        return store, None

    async def embed(*_: Any, **__: Any) -> None:
        loaded.append("embedder")

    gate = MemoryGate(dict)
    recall = MemoryRecall(
        parts,
        embed,
        current=lambda agent_id: True,
        scope=lambda agent, user: gate.scope(agent, agent, user=user),
        knowledge_exists=exists,
    )
    warm = HostToolCall(_call(ada, "").context, "warm-1", {**_call(ada, "").input, "warm": True})
    assert (await recall(warm)).status == "success"
    empty = await recall(_call(ada, "which host do deploys use?"))
    assert (empty.status, empty.data["items"]) == ("success", [])
    assert (asked, loaded) == ([ada, ada], [])

    await fill(store, ada)
    assert (await recall(warm)).status == "success"
    assert loaded == ["memory", "embedder"]
    assert store.bm25.built(ada)
    found = await recall(_call(ada, "which host do deploys use?"))
    assert "host.fix" in _names(found)
    assert asked == [ada, ada, ada]  # known to have knowledge since the warm-up


async def test_warm_ups_under_way_together_share_one_build(pool: Pool, ada: str) -> None:
    store = PostgresMemoryStore(pool)
    await fill(store, ada)
    await asyncio.gather(*(store.warm_bm25(ada) for _ in range(3)))
    assert store.bm25.built(ada)
    await store.warm_bm25(ada)  # a later one catches up on its own


async def test_a_prewarm_settles_once_its_builds_are_done(pool: Pool, ada: str) -> None:
    """What memory's start waits for before its backfill takes a connection of its own."""
    store = PostgresMemoryStore(pool)
    await fill(store, ada)
    prewarm = Bm25Prewarm(store)
    prewarm.session_started("s-1", ada)
    assert not store.bm25.built(ada)
    await prewarm.settled()
    assert store.bm25.built(ada)
    await prewarm.settled()  # nothing under way: returns at once
    await prewarm.aclose()
