"""`choirctl memory reembed --all` when one agent's re-embed fails, against a real choird, real
Postgres and an OpenAI-compatible server that refuses agent-2's texts: the agents finished
before it are listed with their figures and keep their vectors, one error line names agent-2,
why, the agent not started and the command that resumes, `--json` says the same as data, the
exit code is the failure's, and running that command again completes the rest without
embedding the finished agent's rows again — after a model change (`--all`) and after an outage
(`--all --missing`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from choir.store.memory.embedding_model import EmbeddingModel
from choir.store.postgres.pool import connect, open_pool
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until
from tests.harness.processes import Choird
from tests.memory.embeddings_server import EmbeddingsServer
from tests.memory.reembed.support import (
    AGENTS,
    add_knowledge,
    choirctl,
    memory_of,
    sent_of,
    stop,
    three_agents_home,
    use_model,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROWS = 20
"""Knowledge items per agent: fewer than one embedding batch, so agent-2's failure is one
failed batch (the breaker stays closed and the next agent could still be served)."""


def agent_2s(texts: list[str]) -> bool:
    return any(text.startswith("agent-2 ") for text in texts)


async def test_a_failed_agent_stops_all_says_what_finished_and_the_same_command_resumes(
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
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            since = len(server.batches)
            server.refuse = agent_2s

            stopped = await choirctl(home, "memory", "reembed", "--all", "--json")
            assert stopped.returncode == 6, stopped.stderr  # the failure's code: unavailable
            answer = json.loads(stopped.stdout)
            [first] = answer["agents"]
            assert first == {
                "agent_id": "agent-1",
                "model": "m2",
                "dims": 16,
                "previous_model": "m1",
                "previous_dims": 16,
                "embedded": ROWS,
            }
            why = answer["stopped"]
            assert (why["agent_id"], why["code"], why["not_started"]) == (
                "agent-2",
                "unavailable",
                ["agent-3"],
            )
            assert "agent-2" in why["message"]
            [line] = stopped.stderr.strip().splitlines()
            assert line.startswith("error: re-embed stopped at agent-2: ")
            assert "not started: agent-3" in line
            assert "`choirctl memory reembed --all` resumes" in line
            finished = await memory_of(pool, "agent-1")
            assert finished.model == EmbeddingModel("m2", 16)
            assert finished.missing == 0  # its vectors are stored
            assert (await memory_of(pool, "agent-3")).model == EmbeddingModel("m1", 16)

            # the same, for a person: a line per finished agent on stdout, then the error
            again = await choirctl(home, "memory", "reembed", "--all")
            assert again.returncode == 6, again.stderr
            [row] = [r for r in again.stdout.splitlines() if r.startswith("agent-1")]
            assert row.split() == ["agent-1", "m2", "(16)", "same", "0"]  # nothing re-embedded
            assert "agent-2" not in again.stdout
            [error] = [e for e in again.stderr.splitlines() if e.startswith("error:")]
            assert "re-embed stopped at agent-2" in error
            assert "1 agent(s) finished" in error

            # the embedder serves agent-2 again: the command named resumes
            server.refuse = None
            resumed = await choirctl(home, "memory", "reembed", "--all", "--json")
            assert resumed.returncode == 0, resumed.stderr
            done = {a["agent_id"]: a for a in json.loads(resumed.stdout)["agents"]}
            assert list(done) == list(AGENTS)
            assert "stopped" not in json.loads(resumed.stdout)
            assert done["agent-1"]["embedded"] == 0
            assert done["agent-3"]["embedded"] == ROWS
            for agent_id in AGENTS:
                memory = await memory_of(pool, agent_id)
                assert (memory.model, memory.missing) == (EmbeddingModel("m2", 16), 0)
            assert sent_of(server, "agent-1", since) == [1] * ROWS  # once, across three runs
            assert sent_of(server, "agent-3", since) == [1] * ROWS

            # an outage left rows without vectors; `--missing` stops the same way, and resumes
            conn = await connect(pg_params)
            try:
                for agent_id in AGENTS:
                    await add_knowledge(conn, agent_id, 5, model="m2", dims=16, start=ROWS + 1)
            finally:
                await conn.close()
            server.refuse = agent_2s
            gap = await choirctl(home, "memory", "reembed", "--all", "--missing", "--json")
            assert gap.returncode == 6, gap.stderr
            answer = json.loads(gap.stdout)
            assert [(a["agent_id"], a["embedded"]) for a in answer["agents"]] == [("agent-1", 5)]
            assert answer["stopped"]["agent_id"] == "agent-2"
            assert answer["stopped"]["not_started"] == ["agent-3"]
            assert "`choirctl memory reembed --all --missing` resumes" in gap.stderr
            server.refuse = None
            filled = await choirctl(home, "memory", "reembed", "--all", "--missing", "--json")
            assert filled.returncode == 0, filled.stderr
            figures = [(a["agent_id"], a["embedded"]) for a in json.loads(filled.stdout)["agents"]]
            # agent-2's and agent-3's rows may partly be filled by choird's own backfill once
            # the embedder answers again (its breaker cooled down): the figure says what this
            # run stored; the finished agent-1 is not embedded again
            assert figures[0] == ("agent-1", 0)
            assert [agent_id for agent_id, _ in figures] == list(AGENTS)
            assert all(0 <= embedded <= 5 for _, embedded in figures)
            for agent_id in AGENTS:
                assert (await memory_of(pool, agent_id)).missing == 0
            assert sent_of(server, "agent-1", since) == [1] * (ROWS + 5)
        finally:
            await asyncio.to_thread(teardown, home, choird)
