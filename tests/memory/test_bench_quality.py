"""`bench.memory_quality`: its metrics, its labelled set, and one run on a little noise."""

from __future__ import annotations

import math

import pytest

from bench.memory_quality import ndcg, quality_figures, recall
from bench.memory_quality_set import TOPICS

pytestmark = pytest.mark.slow


def test_ndcg_and_recall() -> None:
    gains = {"now": 2, "log": 1, "old": 0}
    assert ndcg(["now", "log"], gains) == pytest.approx(1.0)
    assert ndcg(["old", "now", "log"], gains) == pytest.approx(
        (3 / math.log2(3) + 1 / 2) / (3 + 1 / math.log2(3))
    )
    assert ndcg(["x"], gains) == 0.0
    assert recall(["old", "log"], gains) == 0.5


def test_every_question_has_an_answer_and_names_are_unique() -> None:
    names = [item.name for topic in TOPICS for item in topic.items]
    assert len(names) == len(set(names))
    for topic in TOPICS:
        for query in topic.queries:
            assert max(query.gains.values()) == 2
            assert set(query.gains) <= {item.name for item in topic.items}
    assert sum(q.paraphrase for t in TOPICS for q in t.queries) >= 10


async def test_relevance_beats_text_and_vector() -> None:
    figures = await quality_figures(200)
    assert figures["relevance_margin"] >= 0.05
    assert figures["queries"] == sum(len(topic.queries) for topic in TOPICS)
