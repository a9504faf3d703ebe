"""`choirctl memory reembed --all` when choird dies under it, against a real choird process, real
Postgres and an OpenAI-compatible server: choird is SIGKILLed while agent-2's re-embed sleeps
after storing a page (`memory.reembed.after_page=sleep`), agent-1's finished. The command
still lists agent-1 with its figures, then one error line says agent-1 finished, that choird
stopped answering while agent-2's re-embed ran, and the command that resumes; the exit code is
6 (unavailable). `--json` prints the agents finished as data, with the same line on stderr.
Once choird is back, that command completes the rest and embeds no finished agent's row again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from choir.store.memory.embedding_model import EmbeddingModel
from choir.store.postgres.pool import open_pool
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until
from tests.harness.processes import Choird
from tests.memory.embeddings_server import EmbeddingsServer
from tests.memory.reembed.support import (
    AGENTS,
    choirctl,
    memory_of,
    sent_of,
    stop,
    three_agents_home,
    use_model,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROWS = 20
"""Knowledge items per agent: one page each."""
HOLD = "memory.reembed.after_page=sleep(5000)"
"""Every page is followed by 5 s: agent-1's run finishes after its page, agent-2's is killed."""


async def test_all_killed_midway_lists_the_agents_finished_and_names_the_command_that_resumes(
    root: Path, pg_params: ConnectParams
) -> None:
    server = EmbeddingsServer(dimensions=16)
    choird: Choird | None = None
    async with server, open_pool(pg_params, min_size=1, max_size=2) as pool:
        home = await three_agents_home(
            root, pg_params, server.url, knowledge=ROWS, model="m1", dims=16
        )
        try:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")

            async def embedded() -> bool:  # choird's start-up backfill, with m1
                return all([(await memory_of(pool, a)).missing == 0 for a in AGENTS])

            await poll_until(embedded, within=60, every=0.2)
            await asyncio.to_thread(stop, choird)
            use_model(home, server.url, "m2", 16)  # every agent stale: nothing embeds at start
            since = len(server.batches)

            async def killed_in_agent_2s_run(model: str, *args: str) -> tuple[int, str, str]:
                nonlocal choird
                choird = await asyncio.to_thread(
                    spawn_choird, home, "--runtime", "process", CHOIR_FAILPOINTS=HOLD
                )
                run = asyncio.create_task(choirctl(home, "memory", "reembed", "--all", *args))

                async def agent_2s_page_stored() -> bool:
                    memory = await memory_of(pool, "agent-2")
                    return memory.model == EmbeddingModel(model, 16) and memory.missing == 0

                await poll_until(agent_2s_page_stored, within=60, every=0.1)
                choird.process.kill()  # in the sleep after the page: agent-2's run unfinished
                await asyncio.to_thread(choird.process.wait, 30)
                done = await run
                return done.returncode, done.stdout, done.stderr

            code, stdout, stderr = await killed_in_agent_2s_run("m2")
            assert code == 6, stderr
            [row] = [r for r in stdout.splitlines() if r.startswith("agent-")]
            assert row.split() == ["agent-1", "m2", "(16)", "m1", "(16)", "20"]
            [line] = [e for e in stderr.splitlines() if e.startswith("error:")]
            assert line.startswith("error: choird stopped answering while agent-2's re-embed ran")
            assert "; finished: agent-1 (their vectors kept);" in line
            assert "`choirctl memory reembed --all` resumes" in line
            assert (await memory_of(pool, "agent-3")).model == EmbeddingModel("m1", 16)

            # the same kill, with --json and another model
            use_model(home, server.url, "m3", 16)
            code, stdout, stderr = await killed_in_agent_2s_run("m3", "--json")
            assert code == 6, stderr
            answer = json.loads(stdout)
            assert "stopped" not in answer
            [finished] = answer["agents"]
            assert (finished["agent_id"], finished["model"], finished["embedded"]) == (
                "agent-1",
                "m3",
                ROWS,
            )
            [line] = stderr.strip().splitlines()
            assert line.startswith("error: choird stopped answering while agent-2's re-embed ran")
            assert "; finished: agent-1 (their vectors kept);" in line

            # choird back: the command named completes the rest, no row embedded twice
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            resumed = await choirctl(home, "memory", "reembed", "--all", "--json")
            assert resumed.returncode == 0, resumed.stderr
            done = {a["agent_id"]: a["embedded"] for a in json.loads(resumed.stdout)["agents"]}
            assert done == {"agent-1": 0, "agent-2": 0, "agent-3": ROWS}
            for agent_id in AGENTS:
                memory = await memory_of(pool, agent_id)
                assert (memory.model, memory.missing) == (EmbeddingModel("m3", 16), 0)
            assert sent_of(server, "agent-1", since) == [2] * ROWS  # once per model
            assert sent_of(server, "agent-2", since) == [2] * ROWS  # stored before each kill
            assert sent_of(server, "agent-3", since) == [1] * ROWS
        finally:
            await asyncio.to_thread(teardown, home, choird)
