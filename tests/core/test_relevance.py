"""Design 004's relevance formula."""

from __future__ import annotations

import math
import uuid

import pytest

from choir.core.memory.knowledge.relevance import (
    Candidate,
    RelevanceWeights,
    check_kind,
    ranked,
    temporal,
)
from choir.errors import UsageError

A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))


@pytest.mark.parametrize(
    ("days", "count", "expected"),
    [
        (0, 0, 1.0),
        (10, 0, math.exp(-0.5)),
        (10, 5, math.exp(-0.5) * 1.1),
        (0, 50, 2.0),
        (-1, 0, 1.0),  # a clock running behind: counts as now
    ],
)
def test_temporal(days: float, count: int, expected: float) -> None:
    assert temporal(days, count) == pytest.approx(expected)


def test_the_formula_with_design_004s_weights() -> None:
    candidates = [
        Candidate(A, bm25=4.0, similarity=0.5, days_since_access=0, access_count=0, kind="fact"),
        Candidate(B, bm25=2.0, similarity=-0.3, days_since_access=20, access_count=10, kind="x"),
        Candidate(C, bm25=0.0, similarity=None, days_since_access=0, access_count=0, kind="task"),
    ]
    got = dict(ranked(candidates, RelevanceWeights(), limit=3))
    assert got[A] == pytest.approx(0.3 * 1 + 0.3 * 0.5 + 0.3 * 1 + 0.1 * 0.6)
    # BM25 relative to the best; a negative similarity counts 0; an unknown kind is a fact
    assert got[B] == pytest.approx(0.3 * 0.5 + 0 + 0.3 * math.exp(-1) * 1.2 + 0.1 * 0.6)
    assert got[C] == pytest.approx(0.3 * 1 + 0.1 * 0.5)
    assert list(got) == [A, C, B]
    assert ranked(candidates, RelevanceWeights(), limit=1) == [(A, got[A])]
    assert ranked([], RelevanceWeights(), limit=5) == []


def test_ties_go_by_id() -> None:
    same = [Candidate(i, 1.0, None, 0, 0, "fact") for i in (C, A, B)]
    assert [i for i, _ in ranked(same, RelevanceWeights(), 3)] == [A, B, C]


def test_kinds() -> None:
    assert check_kind("correction") == "correction"
    with pytest.raises(UsageError, match="use correction, preference, fact, task"):
        check_kind("rumour")
