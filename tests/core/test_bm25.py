"""The in-memory BM25 index: scores equal `bm25s`' Lucene BM25 on the same terms, and an index
kept by single-item writes, rewrites and removals (compactions included) ranks exactly as one
built from the surviving items."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import bm25s
import pytest

from choir.core.memory.knowledge import bm25
from choir.core.memory.knowledge.bm25 import Bm25Index

WORDS = [
    "deploy",
    "host",
    "castor",
    "release",
    "printer",
    "floor",
    "wiki",
    "standup",
    "friday",
    "test",
    "cache",
]


def corpus(rng: random.Random, count: int) -> dict[uuid.UUID, list[str]]:
    return {
        uuid.UUID(int=rng.getrandbits(128)): [rng.choice(WORDS) for _ in range(rng.randint(0, 12))]
        for _ in range(count)
    }


def put(index: Bm25Index, item_id: uuid.UUID, tokens: list[str]) -> None:
    index.put(item_id, Counter(tokens), len(tokens))


def built(items: dict[uuid.UUID, list[str]]) -> Bm25Index:
    postings: dict[str, tuple[list[int], list[int]]] = {}
    for slot, tokens in enumerate(items.values()):
        for term, tf in Counter(tokens).items():
            postings.setdefault(term, ([], []))
            postings[term][0].append(slot)
            postings[term][1].append(tf)
    lengths = [len(tokens) for tokens in items.values()]
    return Bm25Index.built(list(items), lengths, [(t, s, f) for t, (s, f) in postings.items()])


@pytest.mark.parametrize("query", [["deploy"], ["castor", "release"], ["test", "cache", "wiki"]])
def test_scores_match_bm25s(query: list[str]) -> None:
    items = corpus(random.Random(3), 60)
    ids = list(items)
    reference = bm25s.BM25(k1=bm25.K1, b=bm25.B, method="lucene")
    reference.index([items[i] for i in ids], show_progress=False)
    expected = dict(zip(ids, map(float, reference.get_scores(query)), strict=True))

    for index in (built(items), _one_by_one(items)):
        got = dict(index.top(query, limit=len(ids)))
        assert got.keys() == {i for i, score in expected.items() if score > 0}
        for item_id, score in got.items():
            assert score == pytest.approx(expected[item_id], rel=1e-6)  # bm25s: float32
        assert index.scores_of(query, ids) == pytest.approx(expected, rel=1e-6)


def _one_by_one(items: dict[uuid.UUID, list[str]]) -> Bm25Index:
    index = Bm25Index()
    for item_id, tokens in items.items():
        put(index, item_id, tokens)
    return index


def test_writes_and_removals_rank_as_a_fresh_build() -> None:
    rng = random.Random(7)
    live = corpus(rng, 300)
    index = built(live)
    for step in range(12_000):  # enough retired slots for several compactions
        item_id = rng.choice(list(live)) if live and rng.random() < 0.7 else uuid.uuid4()
        if rng.random() < 0.3:
            index.remove(item_id)
            live.pop(item_id, None)
        else:
            live[item_id] = [rng.choice(WORDS) for _ in range(rng.randint(0, 12))]
            put(index, item_id, live[item_id])
        if step % 3_000 == 0:
            assert_same(index, built(live))
    assert len(index) == len(live)
    assert_same(index, built(live))


def assert_same(index: Bm25Index, fresh: Bm25Index) -> None:
    for query in (["deploy"], ["castor", "release", "friday"], WORDS):
        got, want = index.top(query, 10), fresh.top(query, 10)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


def test_ties_go_by_id_and_nothing_matches_nothing() -> None:
    ids = sorted(uuid.uuid4() for _ in range(30))
    index = Bm25Index()
    for item_id in reversed(ids):
        index.put(item_id, {"same": 1}, 4)
    assert [i for i, _ in index.top(["same"], 5)] == ids[:5]
    assert index.top(["absent"], 5) == []
    assert Bm25Index().top(["same"], 5) == []
    index.put(ids[0], {}, 0)  # rewritten without terms: it still counts in N, matches nothing
    assert ids[0] not in dict(index.top(["same"], 30))


def test_scores_taken_before_writes_stay_right() -> None:
    """A relevance search scores, awaits Postgres (other searches apply writes), then asks
    the scores of its vector candidates."""
    rng = random.Random(11)
    items = corpus(rng, 50)
    index = built(items)
    kept, gone = list(items)[:2]
    expected = index.scored(["deploy", "castor"]).of([kept])
    scored = index.scored(["deploy", "castor"])
    index.remove(gone)
    put(index, uuid.uuid4(), ["deploy"])  # a new slot past the scored ones
    new = uuid.uuid4()
    put(index, new, ["castor"])
    assert scored.of([kept, gone, new]) == {kept: expected[kept], new: 0.0}
    for _ in range(bm25._COMPACT_AFTER + 1):  # renumbers every slot
        put(index, new, ["castor"])
    assert index.scored(["deploy", "castor"]).of([kept]) == scored.of([kept])
