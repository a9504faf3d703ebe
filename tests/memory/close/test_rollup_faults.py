"""The summary tree's root under faults: a roll-up whose `memory_rollup` event is durable is
stored once, linked derived_from the summary it covers, whatever choird missed — killed after the
event was durable and before storing it (the close stores it when choird is back), killed again
after storing it (the resumed close does not store it twice), or its eager store failing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from choir import failpoints
from choir.protocol.log.events import AgentReplied, MemoryRollup, SessionSummary, UserMsg
from choir.store.agent_schema import run_as_agent
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, connect, open_pool
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until, pool_of, running_daemon
from tests.harness.homes import external_postgres, make_home
from tests.memory.close.support import close_state, run_session, store_ended_session, wait_closed
from tests.memory.close.test_archive_faults import SESSION, compacted

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

LATER = "s-44ee55ff66aa77bb"
BRANCH = f"summary/{SESSION.removeprefix('s-')}"
ROLLUP = "rollup/2026-11-27T14:40Z"


def rolled_up(covers: str = BRANCH) -> list[UserMsg | AgentReplied | MemoryRollup]:
    """A later session: a greeting, then edge's idle roll-up over `covers`."""
    return [
        UserMsg(text="hello"),
        AgentReplied(text="Hello."),
        MemoryRollup(name=ROLLUP, text="Across sessions: the deploy script.", covers=[covers]),
    ]


async def roots(pool: Pool) -> list[tuple[str, str, list[str]]]:
    """Each roll-up item: its name, text and the names it is derived from."""
    async with pool.acquire() as conn, run_as_agent(conn, "agent-1") as agent:
        rows = await agent.fetch(
            """
            SELECT r.name, r.text, ARRAY(
                SELECT t.name FROM knowledge_edges e
                JOIN knowledge_documents t ON t.id = e.target_id
                WHERE e.source_id = r.id AND e.type = 'derived_from' ORDER BY t.name) AS sources
            FROM knowledge_documents r WHERE r.metadata ? 'memory_rollup'
            """
        )
    return [(row["name"], row["text"], list(row["sources"])) for row in rows]


async def test_a_rollup_durable_when_choird_died_is_stored_once_linked_across_kills(
    root: Path, pg_params: ConnectParams
) -> None:
    home = make_home(root, postgres=external_postgres(pg_params))
    conn = await connect(pg_params)
    try:
        await apply_control_schema(conn)
        summary = SessionSummary(summary="The user asked how the deploy script works.")
        await store_ended_session(conn, SESSION, [*compacted(), summary])
        await store_ended_session(conn, LATER, rolled_up())  # durable, nothing stored
    finally:
        await conn.close()
    choird = None
    try:
        choird = await asyncio.to_thread(
            spawn_choird,
            home,
            "--runtime",
            "process",
            CHOIR_FAILPOINTS="memory.close.after_chunks=exit",
        )
        process = choird.process
        await poll_until(lambda: process.poll() is not None, within=60)
        assert process.returncode == 137  # killed inside the first close, after its items
        async with open_pool(pg_params, min_size=1, max_size=2) as pool:
            states = {await close_state(pool, s) for s in (SESSION, LATER)}
            assert "closing" in states

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            await wait_closed(pool, SESSION, LATER, within=60)
            [(name, text, sources)] = await roots(pool)
            assert (name, sources) == (ROLLUP, [BRANCH])  # linked, whichever closed first
            assert "Across sessions: the deploy script." in text
            assert f"Session summaries: {BRANCH}" in text
    finally:
        await asyncio.to_thread(teardown, home, choird)


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    monkeypatch.setattr(failpoints, "_armed", None)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({failpoints.ENV_VAR: spec})

    return arm


async def test_a_rollup_whose_eager_store_failed_is_stored_once_at_the_sessions_close(
    root: Path, pg_params: ConnectParams, armed: Callable[[str], None]
) -> None:
    armed("memory.rollup.before_store=panic")
    home = make_home(root, postgres=external_postgres(pg_params))
    async with running_daemon(home) as daemon:
        await daemon.memory_started()
        first = await run_session(daemon, [*compacted(), SessionSummary(summary="Deploys.")])
        await wait_closed(pool_of(daemon), first, within=60)
        branch = f"summary/{first.removeprefix('s-')}"
        later = await run_session(daemon, rolled_up(branch))
        await wait_closed(pool_of(daemon), later, within=60)
        assert daemon.archive_writer is not None
        await daemon.archive_writer.settled()
        assert [(n, s) for n, _, s in await roots(pool_of(daemon))] == [(ROLLUP, [branch])]
        assert daemon.memory_store is not None  # the close stored it as its session's user's
        for name in (ROLLUP, branch):
            item = await daemon.memory_store.get_knowledge("agent-1", name)
            assert (item.memory_class, item.owner_user) == ("knowledge", "console")
