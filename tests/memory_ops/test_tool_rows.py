"""Tool-call rows end to end on a real choird (in this process) and the test's Postgres.

A session whose agent called tools is replicated over the agent's socket and stopped; its close
stores one sentence per call, found by a text search on words only the sentence holds and by
vector. `choirctl memory backfill-tools` (the real CLI against the running choird) gives
sessions closed before the feature their rows exactly once — a promoted session's in
`long_term_detail`, without making it mid-term again — and `memory stats` (choirctl, and the
agent's `choir.memory.query` mode `stats`) counts what is still to do. The agent browses a
session's messages in order, a page at a time (mode `browse`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.daemon.app import ChoirDaemon
from choir.daemon.memory.search.query import MemoryQuery
from choir.home import ChoirHome
from choir.protocol import ExecuteHostToolRequest
from choir.protocol.log.events import (
    AgentReplied,
    Event,
    ModelOutput,
    SessionSummary,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.pool import Pool
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import Run, choirctl
from tests.e2e.agent_side import hello
from tests.harness.cluster import serving
from tests.harness.daemons import agent_control_plane, pool_of
from tests.harness.homes import external_postgres, make_home
from tests.memory.close.support import run_session, wait_closed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

_ids = itertools.count(1)


def tool_session(number: int) -> list[Event]:
    """A session in which the agent writes the todo list, runs the tests and searches the web."""
    calls = [
        ToolCall(
            id=f"w{number}",
            name="choir.fs.write",
            arguments={"path": "notes/todo.md", "op": "overwrite", "content": "a\nb\nc\n"},
        ),
        ToolCall(id=f"x{number}", name="choir.exec", arguments={"command": "pytest -q"}),
    ]
    results = [
        ToolResult.ok(
            "overwrite applied to notes/todo.md: 3 lines, 6 bytes",
            path="notes/todo.md",
            op="overwrite",
            created=False,
        ),
        ToolResult(status="success", summary="exit 0", data={"exit_code": 0}),
    ]
    search = ToolCall(id=f"s{number}", name="choir.web.search", arguments={"query": "ruff rules"})
    return [
        UserMsg(text=f"session {number}: note the todo items, run the tests, look up ruff"),
        ModelOutput(lane="edge", model="scripted", tool_calls=calls),
        *[
            ToolResultCommitted(call_id=call.id, tool=call.name, result=result)
            for call, result in zip(calls, results, strict=True)
        ],
        ModelOutput(lane="edge", model="scripted", tool_calls=[search]),
        ToolResultCommitted(
            call_id=search.id,
            tool=search.name,
            result=ToolResult.ok("2 results", query="ruff rules", results=[{}, {}]),
        ),
        AgentReplied(text="Done: the todo is noted and the tests pass."),
        SessionSummary(summary=f"Session {number}: todo noted, tests green."),
    ]


async def tool_rows(pool: Pool, agent_id: str = "agent-1") -> list[dict[str, Any]]:
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        rows = await agent.fetch(
            "SELECT d.session_id, d.tier, d.chunk_index, d.text, d.first_rev, d.last_rev, "
            "e.document_id IS NOT NULL AS vector "
            "FROM memory_documents d LEFT JOIN memory_embeddings e ON e.document_id = d.id "
            "WHERE d.kind = 'tool_description' ORDER BY d.session_id, d.chunk_index DESC"
        )
    return [dict(row) for row in rows]


async def forget_tool_rows(
    pool: Pool, agent_id: str = "agent-1", *, keep: tuple[str, int] | None = None
) -> None:
    """What a session closed by a choird before this feature looks like: no tool rows (but
    `keep`'s (session, index): a session closed again after a resume has its later part's)."""
    session, index = keep if keep is not None else ("", 1)
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        await agent.execute(
            "DELETE FROM memory_documents WHERE kind = 'tool_description' "
            "AND NOT (session_id = $1 AND chunk_index = $2)",
            session,
            index,
        )


async def ctl(home: ChoirHome, *args: str) -> Run:
    return await asyncio.to_thread(choirctl, home.root, *args)


@pytest.fixture
def tool_home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    return make_home(root, postgres=external_postgres(pg_params), mid_term_sessions=1)


@pytest.fixture
async def live(tool_home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with serving(tool_home) as (daemon, client):
        await daemon.memory_started()
        yield daemon, client


async def test_a_closed_session_s_tool_calls_are_found_by_their_sentence(
    live: tuple[ChoirDaemon, ChoirClient],
):
    daemon, _ = live
    session_id = await run_session(daemon, tool_session(0))
    await wait_closed(pool_of(daemon), session_id)
    assert daemon.memory_index is not None
    await daemon.memory_index.settled()
    store = daemon.memory_store
    assert store is not None

    rows = await tool_rows(pool_of(daemon))
    # "wrote" and "ran" are in no chunk: only the sentences hold them
    hits = await store.search("agent-1", MemoryQuery(mode="text", text="wrote lines", limit=3))
    assert daemon.memory is not None
    vector = await daemon.memory.embed_query("ran pytest", timeout_s=30)
    near = await store.search("agent-1", MemoryQuery(mode="semantic", vector=vector, limit=10))

    assert [(r["chunk_index"], r["first_rev"], r["last_rev"], r["text"]) for r in rows] == [
        (-3, 2, 3, "agent wrote 3 lines to notes/todo.md"),
        (-4, 2, 4, "agent ran `pytest -q` (exit 0)"),
        (-6, 5, 6, 'agent searched the web for "ruff rules" (2 results)'),
    ]
    assert {(r["session_id"], r["tier"], r["vector"]) for r in rows} == {
        (session_id, "mid_term", True)
    }
    assert hits[0].text == "agent wrote 3 lines to notes/todo.md"
    assert hits[0].source.session_id == session_id
    assert "agent ran `pytest -q` (exit 0)" in [hit.text for hit in near]


async def test_backfill_fills_old_sessions_once_and_stats_count_what_is_left(
    live: tuple[ChoirDaemon, ChoirClient], tool_home: ChoirHome
):
    daemon, _ = live
    pool = pool_of(daemon)
    older = await run_session(daemon, tool_session(1))
    await wait_closed(pool, older)
    newer = await run_session(daemon, tool_session(2))  # promotes `older` (mid_term_sessions 1)
    await wait_closed(pool, newer)
    assert daemon.memory_index is not None
    await daemon.memory_index.settled()
    stored = await tool_rows(pool)
    await forget_tool_rows(pool, keep=(newer, -6))  # `newer` resumed: its last call has one

    before = (await ctl(tool_home, "memory", "stats", "agent-1", "--json")).json()["agents"][0]
    shown = await ctl(tool_home, "memory", "stats", "agent-1")
    first = await ctl(tool_home, "memory", "backfill-tools", "agent-1")
    await daemon.memory_index.settled()
    filled = await tool_rows(pool)
    again = await ctl(tool_home, "memory", "backfill-tools", "agent-1", "--json")
    after = (await ctl(tool_home, "memory", "stats", "agent-1", "--json")).json()["agents"][0]
    assert daemon.memory_store is not None
    mid_term = await daemon.memory_store.mid_term_sessions("agent-1")

    assert {(r["session_id"], r["tier"]) for r in stored} == {
        (older, "long_term_detail"),
        (newer, "mid_term"),
    }
    assert (before["tool_sessions_undescribed"], before["tool_calls_undescribed"]) == (2, 5)
    assert (before["tool_rows"], before["sessions_pending"]) == (1, 0)
    assert before["sessions_unsummarized"] == 0
    assert 0 < before["vector_coverage"] <= 1
    assert "calls without one 5 in 2 sessions (choirctl memory backfill-tools agent-1)" in (
        shown.out
    )
    assert first.code == 0, first.err
    assert first.out.splitlines()[1].split() == ["agent-1", "2", "5", "0"]
    assert "sessions" in first.err  # the progress bar, on stderr
    # the same rows as the close stored, each once; the promoted session's stay detail
    assert [(r["session_id"], r["tier"], r["chunk_index"], r["text"]) for r in filled] == [
        (r["session_id"], r["tier"], r["chunk_index"], r["text"]) for r in stored
    ]
    assert [r["vector"] for r in filled] == [r["tier"] == "mid_term" for r in filled]
    assert again.json() == {
        "agents": [{"agent_id": "agent-1", "sessions": 0, "rows": 0, "already": 2}]
    }
    assert mid_term == [newer]  # the backfill made no promoted session mid-term again
    assert (after["tool_sessions_undescribed"], after["tool_rows"]) == (0, 6)


async def test_backfill_refuses_bad_input_in_one_line(
    live: tuple[ChoirDaemon, ChoirClient], tool_home: ChoirHome
):
    neither = await ctl(tool_home, "memory", "backfill-tools")
    unknown = await ctl(tool_home, "memory", "backfill-tools", "nobody")

    assert neither.code == 2
    assert neither.err.strip().splitlines() == [
        "error: name one agent or pass --all: choirctl memory backfill-tools <agent>|--all"
    ]
    assert unknown.code == 4
    assert len(unknown.err.strip().splitlines()) == 1
    assert "nobody" in unknown.err


async def test_the_agent_reads_its_memory_stats_through_the_query_tool(
    live: tuple[ChoirDaemon, ChoirClient],
):
    daemon, _ = live
    session_id = await run_session(daemon, tool_session(3))
    await wait_closed(pool_of(daemon), session_id)
    assert daemon.services is not None
    started = await daemon.services.sessions.start("agent-1", {}, new_session=True)
    agent = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id="agent-1"
    )
    try:
        await agent.init_hello(hello("agent-1", started.session_id))

        async def query(**arguments: Any) -> dict[str, Any]:
            request = ExecuteHostToolRequest(
                tool_name="choir.memory.query", call_id=f"q{next(_ids)}", input=arguments
            )
            output: dict[str, Any] = (await agent.execute_host_tool(request)).output
            return output

        stats = await query(store="session", mode="stats", query="stats")
        wrong_store = await query(store="knowledge", mode="stats", query="stats")
    finally:
        await agent.close()

    assert stats["status"] == "success", stats
    data = stats["data"]
    assert data["tool_rows"] == 3
    assert (data["tool_sessions_undescribed"], data["tool_calls_undescribed"]) == (0, 0)
    assert data["chunks"]["mid_term"] >= 4  # chunks and the three sentences
    assert isinstance(data["embedding_queue_depth"], int)
    assert "tool calls without their description" in stats["summary"]
    assert wrong_store["status"] == "error"
    assert wrong_store["error_code"] == "invalid_input"


async def test_the_agent_browses_a_session_page_by_page(live: tuple[ChoirDaemon, ChoirClient]):
    daemon, _ = live
    session_id = await run_session(daemon, tool_session(4))
    assert daemon.services is not None
    started = await daemon.services.sessions.start("agent-1", {}, new_session=True)
    agent = await agent_control_plane(
        daemon, "uds", started.session_id, started.lease_token, agent_id="agent-1"
    )
    try:
        await agent.init_hello(hello("agent-1", started.session_id))

        async def browse(**arguments: Any) -> dict[str, Any]:
            request = ExecuteHostToolRequest(
                tool_name="choir.memory.query",
                call_id=f"b{next(_ids)}",
                input={"store": "session", "mode": "browse", "query": "browse", **arguments},
            )
            output: dict[str, Any] = (await agent.execute_host_tool(request)).output
            return output

        pages = [await browse(session_id=session_id, limit=2)]
        while (offset := pages[-1]["data"]["next_offset"]) is not None:
            pages.append(await browse(session_id=session_id, limit=2, offset=offset))
        unknown = await browse(session_id="no-such-session")
        other = await browse(session_id=session_id, target_agent="agent-2")
        missing = await browse()
    finally:
        await agent.close()

    assert all(page["status"] == "success" for page in pages), pages
    messages = [(m["rev"], m["who"], m["text"]) for p in pages for m in p["data"]["messages"]]
    assert messages == [
        (1, "user", "session 4: note the todo items, run the tests, look up ruff"),
        (3, "agent", "wrote 3 lines to notes/todo.md"),
        (4, "agent", "ran `pytest -q` (exit 0)"),
        (6, "agent", 'searched the web for "ruff rules" (2 results)'),
        (7, "agent", "Done: the todo is noted and the tests pass."),
    ]
    assert [len(p["data"]["messages"]) for p in pages] == [2, 2, 1]
    assert pages[0]["summary"].endswith("read on with offset 3")
    assert pages[-1]["summary"].endswith("the end of the session")
    assert (unknown["status"], unknown["error_code"]) == ("error", "not_found")
    assert (other["status"], other["error_code"]) == ("error", "not_found")  # not agent-2's
    assert (missing["status"], missing["error_code"]) == ("error", "invalid_input")


async def test_the_operator_reads_a_session_s_messages_with_choirctl(
    live: tuple[ChoirDaemon, ChoirClient], tool_home: ChoirHome
):
    daemon, _ = live
    session_id = await run_session(daemon, tool_session(5))

    first = await ctl(tool_home, "session", "messages", session_id, "--limit", "3")
    rest = await ctl(
        tool_home, "session", "messages", session_id, "--offset", "4", "--limit", "3", "--json"
    )
    unknown = await ctl(tool_home, "session", "messages", "no-such-session")

    assert first.code == 0, first.err
    assert first.out.splitlines() == [
        "     1  user: session 5: note the todo items, run the tests, look up ruff",
        "     3  agent: wrote 3 lines to notes/todo.md",
        "     4  agent: ran `pytest -q` (exit 0)",
        f"(more: choirctl session messages {session_id} --offset 4)",
    ]
    assert rest.json() == {
        "session_id": session_id,
        "agent_id": "agent-1",
        "messages": [
            {
                "rev": 6,
                "who": "agent",
                "text": 'searched the web for "ruff rules" (2 results)',
                "cut": False,
            },
            {
                "rev": 7,
                "who": "agent",
                "text": "Done: the todo is noted and the tests pass.",
                "cut": False,
            },
        ],
        "next_offset": None,
    }
    assert unknown.code == 4
    assert unknown.err.strip().splitlines() == [
        "error: there is no session 'no-such-session'; list them with choirctl session list"
    ]
