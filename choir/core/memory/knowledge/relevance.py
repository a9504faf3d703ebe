"""Decay-aware relevance of knowledge items (design 004), with no I/O.

    relevance = bm25 * 0.3 + semantic * 0.3 + temporal * 0.3 + importance * 0.1

- bm25: the item's BM25 score over the best candidate's (0-1);
- semantic: the cosine similarity of its vector to the query's, below 0 taken as 0 (0 without
  a vector on either side);
- temporal: e^(-0.05 * days since last access) * (1 + 0.02 * access count) — recalled items
  fade slower (reinforcement: every item a relevance search returns counts one access; an item
  never returned counts from its last write);
- importance: by the item's kind — a correction outranks a preference, a fact, a task.

Weights come from config.json (`relevance`); they need not sum to 1 (only the order counts).
The candidates are the query's best BM25 and vector matches: temporal and importance reorder
what matches, they never bring in what does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from choir.errors import UsageError

IMPORTANCE: Final = {"correction": 0.9, "preference": 0.8, "fact": 0.6, "task": 0.5}
"""Base importance by kind (design 004)."""
KINDS: Final = tuple(IMPORTANCE)
DEFAULT_KIND: Final = "fact"
DECAY_PER_DAY: Final = 0.05
REINFORCEMENT: Final = 0.02
"""Temporal boost per recorded access."""


@dataclass(frozen=True, slots=True)
class RelevanceWeights:
    """How much each signal counts; the defaults are design 004's."""

    bm25: float = 0.3
    semantic: float = 0.3
    temporal: float = 0.3
    importance: float = 0.1


@dataclass(frozen=True, slots=True)
class Candidate:
    """What relevance knows of one item matching a query."""

    id: UUID
    bm25: float
    """Raw BM25 score (0: no query term)."""
    similarity: float | None
    """Cosine similarity to the query vector; None without one."""
    days_since_access: float
    access_count: int
    kind: str


def check_kind(kind: str) -> str:
    """`kind`, or the `UsageError` naming the kinds there are."""
    if kind not in IMPORTANCE:
        raise UsageError(f"unknown knowledge kind {kind!r}: use " + ", ".join(KINDS))
    return kind


def temporal(days_since_access: float, access_count: int) -> float:
    """e^(-0.05 * days) * (1 + 0.02 * count); a future access (clock skew) counts as now."""
    return math.exp(-DECAY_PER_DAY * max(days_since_access, 0.0)) * (
        1 + REINFORCEMENT * max(access_count, 0)
    )


def ranked(
    candidates: list[Candidate], weights: RelevanceWeights, limit: int
) -> list[tuple[UUID, float]]:
    """The `limit` most relevant candidates (id, relevance), best first; ties by id."""
    best_bm25 = max((c.bm25 for c in candidates), default=0.0)
    scored = [(c.id, _relevance(c, best_bm25, weights)) for c in candidates]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:limit]


def _relevance(c: Candidate, best_bm25: float, w: RelevanceWeights) -> float:
    text = c.bm25 / best_bm25 if best_bm25 > 0 else 0.0
    semantic = min(max(c.similarity or 0.0, 0.0), 1.0)
    importance = IMPORTANCE.get(c.kind, IMPORTANCE[DEFAULT_KIND])
    return (
        w.bm25 * text
        + w.semantic * semantic
        + w.temporal * temporal(c.days_since_access, c.access_count)
        + w.importance * importance
    )
