"""choird's embedding calls as usage rows (issue 19): each agent billed its share of every call
— the memory queue's batches, a knowledge put, a search's query — with the tokens the provider
reports and their cost at `embedding.price`; with no price the cost is unknown, never 0 (but
the local model costs nothing: $0).

A real choird in the test process (`serving`) on the test's Postgres; an OpenAI-compatible
embeddings server on loopback that bills one token per word, or the local model.
"""

from __future__ import annotations

import asyncio
from uuid import uuid4

import httpx
import pytest

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.protocol.operator.answers import UsageReport
from tests.ctl.cli import choirctl
from tests.daemon.conftest import read_config, write_config
from tests.e2e_agent.test_telemetry import free_port, samples, value
from tests.harness.cluster import serving
from tests.harness.waits import poll_until
from tests.memory.embeddings_server import EmbeddingsServer, words

PER_MILLION_TOKENS = 20.0
FACT = "the printer is on floor two"


async def embedding_usage(client: ChoirClient, calls: int) -> UsageReport:
    """The embedding usage once `calls` calls are stored (they are written within ~1 s)."""

    async def stored() -> bool:
        return (await client.usage(kind="embedding", by="agent")).total.calls >= calls

    await poll_until(stored, within=10)
    return await client.usage(kind="embedding", by="agent")


ROWS = {
    "agent-1": [f"agent one remembers fact number {n}" for n in range(20)],
    "agent-2": [f"the second agent keeps note {n} about the build" for n in range(30)],
}
"""Memory rows both agents' sessions left, queued at once: the queue's batches mix them."""


async def test_a_priced_endpoint_bills_each_agent_its_share(home: ChoirHome) -> None:
    async with EmbeddingsServer(dimensions=256) as server:
        data = read_config(home)
        data["embedding"] = {
            "provider": "test",
            "model": "test-embed",
            "endpoint": server.url,
            "dimensions": 256,
            "price": {"tokens": PER_MILLION_TOKENS},
        }
        port = free_port()
        data["metrics"] = {"listen": f"127.0.0.1:{port}"}
        write_config(home, data)
        async with serving(home) as (daemon, client):
            await daemon.memory_started()
            index = daemon.memory_index
            assert index is not None
            for n in range(30):  # interleaved, as two sessions closing at once
                for agent, texts in ROWS.items():
                    if n < len(texts):
                        index.index(agent, "memory", uuid4(), texts[n])
            await index.settled()
            stored = await client.knowledge_put("agent-2", FACT)  # embedded at once
            assert stored.embedded
            found = await client.memory_search("agent-2", "printer", store="knowledge")
            assert found.mode == "hybrid"  # its query embedded too
            report = await embedding_usage(client, len(server.batches) + 1)
            spend = {view.agent_id: view for view in report.spend}
            shown = await asyncio.to_thread(choirctl, home.root, "usage", "--by", "kind", "--json")
            async with httpx.AsyncClient() as http:
                scraped = samples((await http.get(f"http://127.0.0.1:{port}/metrics")).text)

    first = set(ROWS["agent-1"])
    mixed = [b for b in server.batches if set(b) & first and set(b) - first]
    assert mixed  # a batch held both agents' rows: each is billed its share of it
    by_agent = {row.key: row for row in report.rows}
    assert set(by_agent) == {"agent-1", "agent-2"}
    for agent, row in by_agent.items():
        mine = {*ROWS[agent], FACT, "printer"} if agent == "agent-2" else set(ROWS[agent])
        assert row.calls == len([b for b in server.batches if set(b) & mine])
        assert row.characters == sum(len(t) for b in server.batches for t in b if t in mine)
        assert row.unknown_cost_calls == 0
        assert row.cost_usd == pytest.approx(row.prompt_tokens * PER_MILLION_TOKENS / 1e6)
        # the spend caps count them: the day's spend is the embedding cost (no LLM call ran)
        assert spend[agent].day_usd == pytest.approx(row.cost_usd)
        # and the metrics endpoint, scraped over HTTP, counts the same
        labels = {"agent": agent, "model": "test-embed", "kind": "embedding"}
        assert value(scraped, "choir_model_calls_total", **labels) == row.calls
        assert value(scraped, "choir_model_characters_total", **labels) == row.characters
        assert value(scraped, "choir_model_tokens_total", **labels, type="prompt") == (
            row.prompt_tokens
        )
        assert value(scraped, "choir_model_cost_usd_total", **labels) == pytest.approx(row.cost_usd)
    billed = words([t for b in server.batches for t in b])  # every token the server billed
    assert sum(row.prompt_tokens for row in report.rows) == billed
    assert shown.code == 0, shown.err
    assert [(r["key"], r["prompt_tokens"]) for r in shown.json()["rows"]] == [("embedding", billed)]


async def test_the_local_model_costs_nothing_and_a_price_on_it_makes_its_cost_unknown(
    home: ChoirHome,
) -> None:
    """The local model runs in choird: $0 by default, not "unknown" on every memory write. It
    reports no tokens, so a price above 0 cannot be applied: those calls cost unknown."""
    async with serving(home) as (_, client):
        await client.knowledge_put("agent-1", FACT)
        [row] = (await embedding_usage(client, 1)).rows
        await asyncio.sleep(1.5)  # the put's second embedding (its index queue's), if any
        [row] = (await embedding_usage(client, 1)).rows
        free = row.calls
        assert (row.key, row.characters) == ("agent-1", free * len(FACT))
        assert (row.cost_usd, row.unknown_cost_calls) == (0.0, 0)  # known: nothing

        data = read_config(home)
        data["embedding"] = {"price": {"tokens": 0.02}}  # a price the calls cannot meet
        write_config(home, data)
        await client.config_load()
        await client.config_apply()
        await client.knowledge_put("agent-1", "the coffee machine is on floor three")
        report = await embedding_usage(client, free + 1)
        by_model = await client.usage(kind="embedding", by="model")
    [row] = report.rows
    assert row.calls > free
    assert (row.unknown_cost_calls, row.cost_usd) == (row.calls - free, 0.0)  # never summed as 0
    assert [r.key for r in by_model.rows] == ["local"]
    bad = await asyncio.to_thread(choirctl, home.root, "usage", "--kind", "speech")
    assert bad.code == 2
    assert bad.err.strip() == "error: --kind 'speech': choose one of llm, embedding, tts"
