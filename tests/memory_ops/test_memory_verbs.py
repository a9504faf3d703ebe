"""memory.search|show|stats and knowledge.* through a real choird on real Postgres.

Each test talks to choird over its operator socket (`ChoirClient`), exactly as choirctl and
the console do; the memory was written through choird's own store and embedding service
(`conftest.filled`). Refusals are checked to be one line, the right error, and to write nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.core.memory.chunks import ChunkKind, MemoryChunk, Tier
from choir.errors import NotFoundError, UsageError
from choir.home import ChoirHome
from choir.store.knowledge.items import KNOWLEDGE_MAX_BYTES
from tests.ctl.cli import choirctl
from tests.daemon.conftest import read_config, write_config
from tests.harness.cluster import serving
from tests.harness.memory import TEXTS, committed_session

from .conftest import Filled


async def test_semantic_text_and_hybrid_search_find_the_chunk_asked_for(filled: Filled):
    client = filled.client
    deploy = str(filled.chunk_ids[0])

    semantic = await client.memory_search(
        "agent-1", "rolling out a new version to staging", mode="semantic"
    )
    text = await client.memory_search("agent-1", "kubectl", mode="text")
    hybrid = await client.memory_search("agent-1", "login cookie test")

    assert (semantic.mode, semantic.fallback) == ("semantic", None)
    assert semantic.hits[0].id == deploy
    assert len(semantic.hits) == 3  # every chunk has a vector, ranked
    assert [hit.id for hit in text.hits] == [deploy]
    assert text.hits[0].text == TEXTS[0]
    assert (hybrid.mode, hybrid.asked_mode) == ("hybrid", "hybrid")
    assert hybrid.hits[0].id == str(filled.chunk_ids[2])
    hit = semantic.hits[0]
    assert (hit.session_id, hit.tier, hit.kind, hit.first_rev, hit.last_rev) == (
        filled.session_id,
        "mid_term",
        "tool_call",
        1,
        2,
    )


async def test_show_opens_a_chunk_with_its_source_events(filled: Filled):
    item = await filled.client.memory_show(str(filled.chunk_ids[1]))

    assert (item.agent_id, item.store, item.knowledge) == ("agent-1", "session", None)
    assert item.chunk is not None
    assert (item.chunk.session_id, item.chunk.tier, item.chunk.chunk_index) == (
        filled.session_id,
        "mid_term",
        1,
    )
    assert (item.chunk.first_rev, item.chunk.last_rev, item.chunk.has_vector) == (3, 4, True)
    assert [(e.rev, e.event_type) for e in item.events] == [(3, "user_msg"), (4, "user_msg")]
    assert [e.payload["text"] for e in item.events] == ["memory event 3", "memory event 4"]
    assert item.events_truncated is False
    with_agent = await filled.client.memory_show(str(filled.chunk_ids[1]), agent_id="agent-1")
    assert with_agent == item


async def test_session_detail_drills_into_a_promoted_session(filled: Filled):
    summary = [MemoryChunk(0, "a session about deploys and tests", ChunkKind.MESSAGES)]
    await filled.store.promote_session("agent-1", filled.session_id, summary)

    detail = await filled.client.memory_search(
        "agent-1", "", mode="session_detail", session_id=filled.session_id
    )
    matched = await filled.client.memory_search(
        "agent-1", "cookie", mode="session_detail", session_id=filled.session_id
    )
    searched = await filled.client.memory_search("agent-1", "kubectl", mode="text")

    assert [hit.id for hit in detail.hits] == [str(i) for i in filled.chunk_ids]
    assert {hit.tier for hit in detail.hits} == {"long_term_detail"}
    assert [hit.id for hit in matched.hits] == [str(filled.chunk_ids[2])]
    assert searched.hits == []  # promoted detail is only reached by drilling in
    with pytest.raises(UsageError, match="session_detail needs a session_id"):
        await filled.client.memory_search("agent-1", "x", mode="session_detail")


async def test_stats_count_tiers_knowledge_missing_vectors_and_the_embedder(filled: Filled):
    await filled.client.knowledge_put("agent-1", "the office wifi is called choir-guest")
    no_vector = [MemoryChunk(0, "a summary never embedded", ChunkKind.MESSAGES)]
    await filled.store.promote_session("agent-1", filled.session_id, no_vector)

    stats = await filled.client.memory_stats()
    one = await filled.client.memory_stats("agent-1")

    assert [s.agent_id for s in stats.agents] == ["agent-1", "agent-2"]
    ada = stats.agents[0]
    assert (ada.chunks.mid_term, ada.chunks.long_term_detail, ada.chunks.long_term_summary) == (
        0,
        3,
        1,
    )
    assert (ada.sessions.long_term_detail, ada.knowledge_items, ada.vectors_missing) == (1, 1, 1)
    assert set(ada.index_bytes) >= {"memory_embeddings_hnsw_idx", "knowledge_documents_tsv_idx"}
    assert all(size > 0 for size in ada.index_bytes.values())
    assert stats.agents[1].knowledge_items == 0
    assert (stats.embedding.provider, stats.embedding.dimensions) == ("local", 256)
    assert (stats.embedding.queue_depth, stats.embedding.breaker) == (0, "closed")
    assert one.agents == stats.agents[:1]


async def test_knowledge_put_update_list_show_and_delete(filled: Filled):
    client = filled.client
    first = await client.knowledge_put("agent-1", "theme: dark", name="user.theme", tags=["ui"])
    second = await client.knowledge_put("agent-1", "theme: light", name="user.theme")
    other = await client.knowledge_put("agent-2", "agent-2 keeps its own notes")
    plain = await client.knowledge_put("agent-1", "standup is at nine")

    assert (first.updated, first.embedded, first.item.has_vector) == (False, True, True)
    assert first.item.metadata == {"tags": ["ui"]}
    assert (second.updated, second.item.id, second.item.text) == (
        True,
        first.item.id,
        "theme: light",
    )
    assert second.embedded  # the new text got its own vector
    assert other.item.agent_id == "agent-2"
    page = await client.knowledge_list("agent-1", limit=1)
    rest = await client.knowledge_list("agent-1", limit=1, after=page.next_after)
    assert [i.id for i in page.items + rest.items] == [first.item.id, plain.item.id]
    assert rest.next_after is None
    assert (await client.knowledge_show("agent-1", "user.theme")).text == "theme: light"
    found = await client.memory_search("agent-1", "which colour scheme", store="knowledge")
    assert found.hits[0].id == first.item.id
    assert found.hits[0].name == "user.theme"
    shown = await client.memory_show(first.item.id)
    assert shown.store == "knowledge"
    assert shown.knowledge is not None
    assert shown.knowledge.edges == []  # `show` reads an item's edges; a write's answer does not
    assert shown.knowledge.model_copy(update={"edges": None}) == second.item

    deleted = await client.knowledge_delete("agent-1", "user.theme")
    assert deleted.deleted
    with pytest.raises(NotFoundError, match=r"agent agent-1 has no knowledge item 'user\.theme'"):
        await client.knowledge_delete("agent-1", "user.theme")
    with pytest.raises(NotFoundError, match="no memory item"):
        await client.memory_show(first.item.id)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.memory_search("nobody", "x"), NotFoundError, "no agent named 'nobody'"),
        (lambda c: c.memory_search("agent-1", "x", store="work"), UsageError,
         "unknown memory store 'work': use session or knowledge"),
        (lambda c: c.memory_search("agent-1", "x", mode="fuzzy"), UsageError,
         "unknown search mode 'fuzzy' for store session: use semantic, text, hybrid, "
         "session_detail"),
        (lambda c: c.memory_search("agent-1", "x", store="knowledge", mode="session_detail"),
         UsageError, "unknown search mode 'session_detail' for store knowledge"),
        (lambda c: c.memory_search("agent-1", "", mode="semantic"), UsageError,
         "mode semantic needs query text"),
        (lambda c: c.memory_show("3f0c0000-0000-4000-8000-000000000000"), NotFoundError,
         "no memory item 3f0c0000-0000-4000-8000-000000000000 in any agent's memory"),
        (lambda c: c.memory_show("not-an-id"), UsageError, "'not-an-id' is not a memory item id"),
        (lambda c: c.memory_stats("nobody"), NotFoundError, "no agent named 'nobody'"),
        (lambda c: c.knowledge_show("agent-1", "missing.key"), NotFoundError,
         "agent agent-1 has no knowledge item 'missing.key'"),
        (lambda c: c.knowledge_put("agent-1", "x" * (KNOWLEDGE_MAX_BYTES + 1)), UsageError,
         f"over the limit of {KNOWLEDGE_MAX_BYTES} bytes"),
        (lambda c: c.knowledge_put("nobody", "x"), NotFoundError, "no agent named 'nobody'"),
        (lambda c: c.knowledge_put("agent-1", "x", tags=[" "]), UsageError, "not a label"),
        (lambda c: c.knowledge_list("agent-1", after="nope"), UsageError,
         "not a knowledge item id"),
    ],
)  # fmt: skip
async def test_a_bad_request_is_one_line_and_writes_nothing(
    filled: Filled, call, error: type[Exception], message: str
):
    before = await filled.client.memory_stats()

    with pytest.raises(error) as refused:
        await call(filled.client)

    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
    assert await filled.client.memory_stats() == before


async def test_without_an_embedder_search_falls_back_to_text_and_says_so(
    home: ChoirHome, root: Path
):
    """An embeddings endpoint nobody listens on: the provider fails, the query is searched by
    text, and a put item is stored without a vector."""
    data = read_config(home)
    data["embedding"] = {
        "provider": "nobody",
        "endpoint": "http://127.0.0.1:9/v1",  # discard: nothing listens
        "dimensions": 256,
        "query_timeout_ms": 300,
    }
    write_config(home, data)
    async with serving(home) as (_, client):
        stored = await client.knowledge_put("agent-1", "the printer is on floor two")
        found = await client.memory_search("agent-1", "printer", store="knowledge")
        stats = await client.memory_stats("agent-1")
        cli = await asyncio.to_thread(
            choirctl, home.root, "memory", "search", "agent-1", "printer", "--store", "knowledge"
        )

    assert cli.code == 0
    assert cli.err == f"warning: {found.fallback}\n"
    assert cli.out.startswith("agent-1's knowledge memory, text search: 1 hit(s)\n")

    assert (stored.embedded, stored.item.has_vector) == (False, False)
    assert (found.mode, found.asked_mode) == ("text", "hybrid")
    assert found.fallback is not None
    assert "searched by text" in found.fallback
    assert found.fallback == (
        "no vector from the embedding provider text-embedding-3-small within 300 ms "
        "(down, slow or failing): searched by text"
    )
    assert [hit.id for hit in found.hits] == [stored.item.id]
    assert stats.agents[0].vectors_missing == 1
    assert stats.embedding.provider == "text-embedding-3-small"


async def test_show_carries_at_most_200_source_events_and_says_there_are_more(filled: Filled):
    session_id = await committed_session(filled.daemon, events=230)
    long_chunk = [MemoryChunk(0, "a long tool run", ChunkKind.TOOL_CALL, 1, 230)]
    past_end = [MemoryChunk(1, "revs never stored", ChunkKind.TOOL_CALL, 229, 240)]
    refs = await filled.store.add_session_chunks(
        "agent-1", session_id, Tier.MID_TERM, long_chunk + past_end
    )

    long = await filled.client.memory_show(str(refs[0].id))
    tail = await filled.client.memory_show(str(refs[1].id))
    cli = await asyncio.to_thread(choirctl, filled.home.root, "memory", "show", str(refs[0].id))

    assert [e.rev for e in long.events] == list(range(1, 201))
    assert long.events_truncated
    assert cli.out.endswith(f"(more: choirctl session events {session_id} --from-rev 201)\n")
    assert ([e.rev for e in tail.events], tail.events_truncated) == ([229, 230], False)


async def test_an_agent_added_by_config_apply_has_its_memory_at_once(
    live: tuple[object, ChoirClient], home: ChoirHome, tmp_path: Path
):
    _, client = live
    data = read_config(home)
    data["workspaces"]["third"] = {"path": str(tmp_path / "ws-third")}
    data["agents"]["agent-3"] = {
        "repo": data["agents"]["agent-1"]["repo"],
        "defaults": {**data["agents"]["agent-1"]["defaults"], "workspace": "third"},
    }
    write_config(home, data)
    await client.config_load()

    await client.config_apply()
    stored = await client.knowledge_put("agent-3", "deploys go through staging", name="deploy")

    assert (stored.item.name, stored.updated) == ("deploy", False)
    listed = await client.knowledge_list("agent-3")
    assert [item.name for item in listed.items] == ["deploy"]
    (stats,) = (await client.memory_stats("agent-3")).agents
    assert (stats.agent_id, stats.knowledge_items) == ("agent-3", 1)
