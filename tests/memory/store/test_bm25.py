"""Knowledge text search is real BM25 (k1, b, document-length normalisation) over name and
text: its scores match `bm25s` (the Lucene variant) computed here on the same corpus, tokenised
by Postgres' own english analyzer; aliases resolve but add no terms."""

from __future__ import annotations

import bm25s
import pytest

from choir.daemon.memory.search.query import MemoryQuery
from choir.daemon.memory.store import PostgresMemoryStore
from choir.store.agent_schema import run_as_agent
from choir.store.memory.search import BM25_B, BM25_K1
from choir.store.postgres.pool import Pool

CORPUS = {
    "deploy.host": "The deploy host is castor; deploys run at night.",
    "deploy.checklist": "Before a deploy: run the tests, tag the release, deploy, deploy again.",
    "user.editor": "The user edits with helix and prefers dark themes.",
    "office.wifi": "The office wifi is choir-guest; the printer is on floor two.",
    "release.notes": "Release notes are written after every release, by hand, in the wiki.",
    "standup": "Standup is at nine, in the small room, every day but Friday.",
}
QUERIES = ["deploy", "release deploy", "host", "printer floor wiki", "editor"]


async def _tokens(pool: Pool, agent_id: str) -> dict[str, list[str]]:
    """Each item's terms as Postgres analysed them (its `terms` column), one per position."""
    async with pool.acquire() as conn, run_as_agent(conn, agent_id) as agent:
        rows = await agent.fetch(
            "SELECT d.name, u.lexeme, cardinality(u.positions) AS tf "
            "FROM knowledge_documents d, unnest(d.terms) AS u"
        )
    tokens: dict[str, list[str]] = {name: [] for name in CORPUS}
    for row in rows:
        tokens[row["name"]] += [row["lexeme"]] * row["tf"]
    return tokens


async def _query_terms(pool: Pool, text: str) -> list[str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT lexeme FROM unnest(to_tsvector('english', $1))", text)
    return [row["lexeme"] for row in rows]


@pytest.mark.parametrize("query", QUERIES)
async def test_scores_match_bm25s_on_the_same_terms(
    store: PostgresMemoryStore, pool: Pool, ada: str, query: str
) -> None:
    for name, text in CORPUS.items():
        await store.add_knowledge(ada, text, name=name)
    await store.alias_knowledge(ada, "standup", "deploy-release-host")  # adds no terms
    tokens = await _tokens(pool, ada)
    names = list(tokens)
    reference = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    reference.index([tokens[name] for name in names], show_progress=False)
    expected = {
        name: float(score)
        for name, score in zip(
            names, reference.get_scores(await _query_terms(pool, query)), strict=True
        )
        if score > 0
    }

    hits = await store.search(ada, MemoryQuery(store="knowledge", mode="text", text=query))

    got = {hit.source.name: hit.score for hit in hits}
    assert got.keys() == expected.keys()
    for name, score in expected.items():
        assert got[name] == pytest.approx(score, rel=1e-5), name
    assert [hit.score for hit in hits] == sorted(got.values(), reverse=True)
    assert "standup" not in got  # its alias's words are not its terms


async def test_the_name_counts_and_length_normalises(store: PostgresMemoryStore, ada: str) -> None:
    long_text = "The castor machine. " + "Unrelated words fill this note up. " * 20
    await store.add_knowledge(ada, "hosts the builds", name="castor")
    await store.add_knowledge(ada, long_text, name="machines")
    await store.add_knowledge(ada, "nothing to see", name="other")

    hits = await store.search(
        ada, MemoryQuery(store="knowledge", mode="text", text="castor", limit=1)
    )

    # both hold "castor" once; the short item (where it is the name) ranks first
    assert [hit.source.name for hit in hits] == ["castor"]
    stop_words_only = MemoryQuery(store="knowledge", mode="text", text="the and of")
    assert await store.search(ada, stop_words_only) == []
