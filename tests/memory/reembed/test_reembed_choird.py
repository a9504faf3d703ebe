"""`choirctl memory reembed` against a real choird process and an OpenAI-compatible server
(counting what it embeds): a dimensions change 256 -> 1536 and back, choird killed midway and
the re-embed resumed with nothing embedded twice, `--missing` after an outage, and the refusals
(unknown agent, no embedder, a second run of the same agent, `--missing` on a stale agent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.errors import UsageError
from choir.home import ChoirHome
from choir.store.memory.embedding_model import EmbeddingModel
from choir.store.postgres.pool import open_pool
from choir.store.postgres.target import ConnectParams
from tests.faults.support import spawn_choird, teardown
from tests.harness.daemons import poll_until
from tests.harness.processes import Choird
from tests.memory.embeddings_server import EmbeddingsServer, slow, status
from tests.memory.reembed.support import (
    AGENT,
    choirctl,
    embedded_texts,
    memory_of,
    seeded_home,
    stop,
    use_model,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def search(home: ChoirHome, query: str) -> dict[str, Any]:
    """`choirctl memory search --mode semantic` of agent-1's knowledge, its JSON answer."""
    found = await choirctl(
        home, "memory", "search", AGENT, query, "--store", "knowledge", "--mode", "semantic",
        "--json",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    answer: dict[str, Any] = json.loads(found.stdout)
    return answer


NOTE_7 = "note 7: the deploy of service 7 runs at 7 o'clock"
"""A knowledge item's text (`seeded_home`): searched for, semantic search finds it first."""
KNOWLEDGE = 560
"""More rows than one backfill page (512): a kill after the first page leaves some."""


async def test_a_dimensions_change_and_back_resumes_after_a_kill_and_embeds_each_row_once(
    root: Path, pg_params: ConnectParams
) -> None:
    server = EmbeddingsServer(dimensions=256)
    choird: Choird | None = None
    async with server, open_pool(pg_params, min_size=1, max_size=2) as pool:
        home = await seeded_home(
            root, pg_params, server.url, knowledge=KNOWLEDGE, model="embed-a", dims=256
        )
        try:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")

            async def all_embedded() -> bool:
                memory = await memory_of(pool)
                return len(memory.texts) > KNOWLEDGE and memory.missing == 0

            await poll_until(all_embedded, within=90, every=0.2)  # the close and the backfill
            before = await memory_of(pool)
            assert set(before.dims) == {256}
            assert before.model == EmbeddingModel("embed-a", 256)
            rows = len(before.texts)
            assert len(set(before.texts)) == rows
            await asyncio.to_thread(stop, choird)

            # the model changes: choird starts (it used to refuse) and says what to run
            use_model(home, server.url, "embed-b", 1536)
            server.dimensions = 1536
            since = len(server.batches)
            choird = await asyncio.to_thread(
                spawn_choird,
                home,
                "--runtime",
                "process",
                CHOIR_FAILPOINTS="memory.reembed.after_page=exit",
            )
            log = home.choird_log.read_text()
            assert "choirctl memory reembed agent-1" in log
            assert "embed-a (256 dimensions)" in log
            await asyncio.sleep(3)  # memory starts: a stale agent is not backfilled
            assert embedded_texts(server, since) == {}
            shown = await choirctl(home, "status", "--json")
            assert json.loads(shown.stdout)["memory_reembed"] == [
                {"agent_id": AGENT, "model": "embed-a", "dims": 256}
            ]
            said = (await choirctl(home, "status")).stdout
            assert "agent-1's vectors are embed-a (256 dimensions)" in said
            assert "until choirctl memory reembed agent-1" in said
            stats = await choirctl(home, "memory", "stats", AGENT, "--json")
            assert (
                "choirctl memory reembed agent-1"
                in json.loads(stats.stdout)["agents"][0]["reembed"]
            )
            stale = await search(home, NOTE_7)
            assert stale["mode"] == "text"  # the 256-dim vectors are never compared
            assert "memory reembed agent-1" in stale["fallback"]
            assert stale["hits"]

            killed = await choirctl(home, "memory", "reembed", AGENT)
            assert killed.returncode == 6, killed.stderr  # choird died under it
            assert len(killed.stderr.strip().splitlines()) == 1, killed.stderr
            await poll_until(lambda: choird is not None and choird.process.poll() == 137, 30)
            midway = await memory_of(pool)
            assert midway.model == EmbeddingModel("embed-b", 1536)
            assert set(midway.dims) == {1536, None}  # never a 256-dim vector beside them
            assert midway.missing == rows - 512  # the first page is stored

            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            done = await choirctl(home, "memory", "reembed", AGENT, "--json")
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout)
            [result] = answer["agents"]
            assert (result["model"], result["dims"]) == ("embed-b", 1536)
            after = await memory_of(pool)
            assert after.missing == 0
            assert set(after.dims) == {1536}
            sent = embedded_texts(server, since)
            assert set(sent) == set(before.texts)
            assert set(sent.values()) == {1}  # across the kill, every row embedded once
            assert server.models[-1] == "embed-b"
            current = await search(home, NOTE_7)
            assert (current["mode"], current["fallback"]) == ("semantic", None)
            assert current["hits"][0]["text"] == NOTE_7  # the same text: the same vector

            # and back: 1536 -> 256, with a progress line per page on stderr
            await asyncio.to_thread(stop, choird)
            use_model(home, server.url, "embed-a", 256)
            server.dimensions = 256
            since = len(server.batches)
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            back = await choirctl(home, "memory", "reembed", AGENT)
            assert back.returncode == 0, back.stderr
            assert f"agent-1: re-embedded [{'#' * 30}] {rows}/{rows} vectors (100%)" in (
                back.stderr
            )
            assert "embed-a (256)" in back.stdout
            assert "embed-b (1536)" in back.stdout
            again = await memory_of(pool)
            assert set(again.dims) == {256}
            assert again.model == EmbeddingModel("embed-a", 256)
            assert set(embedded_texts(server, since).values()) == {1}
        finally:
            await asyncio.to_thread(teardown, home, choird)


async def test_refusals_change_nothing_and_missing_fills_an_outage(
    root: Path, pg_params: ConnectParams
) -> None:
    server = EmbeddingsServer(dimensions=16)
    choird: Choird | None = None
    async with server, open_pool(pg_params, min_size=1, max_size=2) as pool:
        home = await seeded_home(root, pg_params, server.url, knowledge=40, model="m1", dims=16)
        port = server.port
        try:
            use_model(home, "http://127.0.0.1:9/v1", "m1", 16)  # nothing answers: an outage
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")

            async def closed() -> bool:
                return len((await memory_of(pool)).texts) > 40

            await poll_until(closed, within=60, every=0.2)
            outage = await memory_of(pool)
            assert outage.missing == len(outage.texts)  # stored without vectors

            unknown = await choirctl(home, "memory", "reembed", "nobody")
            assert unknown.returncode == 4
            assert "no agent named 'nobody'" in unknown.stderr
            assert "Traceback" not in unknown.stderr
            neither = await choirctl(home, "memory", "reembed")
            assert neither.returncode == 2
            assert "name one agent or pass --all" in neither.stderr
            async with await ChoirClient.connect(home) as client:  # choird checks it too
                with pytest.raises(UsageError, match="name one agent or pass --all"):
                    await client.memory_reembed(AGENT, all_agents=True)
            down = await choirctl(home, "memory", "reembed", AGENT, "--missing")
            assert down.returncode == 6, down.stderr
            assert "no embedder answers (m1" in down.stderr  # the breaker may have opened
            assert "nothing was changed" in down.stderr
            assert len(down.stderr.strip().splitlines()) == 1
            await asyncio.to_thread(stop, choird)

            # the endpoint is back
            use_model(home, f"http://127.0.0.1:{port}/v1", "m1", 16)
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            filled = await choirctl(home, "memory", "reembed", "--all", "--missing", "--json")
            assert filled.returncode == 0, filled.stderr
            agents = {a["agent_id"]: a for a in json.loads(filled.stdout)["agents"]}
            assert set(agents) == {"agent-1", "agent-2"}
            assert agents[AGENT]["model"] == agents[AGENT]["previous_model"] == "m1"
            assert (await memory_of(pool)).missing == 0
            assert set(embedded_texts(server).values()) == {1}
            await asyncio.to_thread(stop, choird)

            # a model change: --missing would mix models, a second run at once is refused
            use_model(home, server.url, "m2", 16)
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            mixed = await choirctl(home, "memory", "reembed", AGENT, "--missing")
            assert mixed.returncode == 2
            assert "without --missing" in mixed.stderr
            server.fail(*[status(500)] * 4)  # the probe and its three retries
            failing = await choirctl(home, "memory", "reembed", AGENT)
            assert failing.returncode == 6
            assert "no embedder answers (m2); nothing was changed" in failing.stderr
            kept = await memory_of(pool)  # the old model's vectors, all of them, still there
            assert kept.model == EmbeddingModel("m1", 16)
            assert kept.missing == 0
            assert set(embedded_texts(server).values()) == {1}
            server.fail(slow(4))  # the first run's probe takes a while
            asked = len(server.batches)
            first = asyncio.create_task(choirctl(home, "memory", "reembed", AGENT))
            await poll_until(lambda: len(server.batches) > asked, 20)  # its probe is out
            second = await choirctl(home, "memory", "reembed", AGENT)
            assert second.returncode == 5
            assert "a re-embed of agent agent-1 is already running" in second.stderr
            assert (await first).returncode == 0
            final = await memory_of(pool)
            assert final.model == EmbeddingModel("m2", 16)
            assert final.missing == 0
        finally:
            await asyncio.to_thread(teardown, home, choird)
