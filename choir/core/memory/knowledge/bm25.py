"""Okapi BM25 over an agent's knowledge items, in memory (design 002's ranking), with no I/O.

    index = Bm25Index()
    index.put(item_id, {"deploy": 2, "host": 1}, length=3)
    index.top(["deploy"], limit=10)        # [(item_id, score), ...], best first

Scores are Lucene's BM25 (`bm25s`' "lucene" method): per query term
idf = ln(1 + (N - df + 0.5) / (df + 0.5)) times tf / (tf + k1 (1 - b + b len / avglen)), where N
counts every item (one with no terms too) and avglen is the mean length over all of them.

Why in memory, not in SQL: the knowledge corpus of a busy agent has a small vocabulary (every
term is common), so a query's terms have tens of thousands of postings at 100k items; summing
them in Postgres cost 934 ms p99 (tsvector unnesting), and even an index-only postings scan with
a hash aggregate costs tens of ms. Here a query is a few numpy operations over the query terms'
postings (about 1 ms). No library keeps exact BM25 under single-item writes: `bm25s` scores
eagerly (any write rescales every score, so a rebuild), tantivy quantises document lengths and
counts deleted documents until a merge. Postgres stays the source of truth: the terms come from
the items' generated `terms` column and the index is rebuilt or caught up from it
(`choir.daemon.memory.search.bm25_index`).

Updates are append-only: rewriting an item retires its slot and takes a new one, so postings
are never edited; retired slots are skipped by the `alive` mask and dropped when they outnumber
the live ones (`_compact`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final
from uuid import UUID

import numpy as np
import numpy.typing as npt

K1: Final = 1.2
"""Term-frequency saturation (Lucene's default): the 2nd occurrence counts less than the 1st."""
B: Final = 0.75
"""Document-length normalisation (Lucene's default): 0 none, 1 full."""
_MIN_CAPACITY: Final = 16
_COMPACT_AFTER: Final = 4096
"""Retired slots tolerated whatever the size: compaction costs a pass over every posting."""


class _Grown:
    """A numpy array that grows by doubling, for appends."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: type[np.generic]) -> None:
        self.data: npt.NDArray[np.generic] = np.empty(_MIN_CAPACITY, dtype=dtype)
        self.size = 0

    def append(self, value: float) -> None:
        if self.size == len(self.data):
            self.data = np.resize(self.data, 2 * len(self.data))
        self.data[self.size] = value
        self.size += 1

    def view(self) -> npt.NDArray[np.generic]:
        return self.data[: self.size]

    def replace(self, values: npt.NDArray[np.generic]) -> None:
        self.data = np.concatenate([values, np.empty(_MIN_CAPACITY, dtype=values.dtype)])
        self.size = len(values)


class _Postings:
    """One term's (slot, tf) pairs, in slot order."""

    __slots__ = ("slots", "tfs")

    def __init__(self) -> None:
        self.slots = _Grown(np.int32)
        self.tfs = _Grown(np.float64)


class Bm25Index:
    """Items' term frequencies and lengths; BM25 top lists and scores of a query's terms."""

    def __init__(self, *, k1: float = K1, b: float = B) -> None:
        self.k1, self.b = k1, b
        self._slot: dict[UUID, int] = {}
        self._ids: list[UUID | None] = []
        self._lengths = _Grown(np.float64)
        self._alive = _Grown(np.bool_)
        self._postings: dict[str, _Postings] = {}
        self._total_length = 0.0
        self._compactions = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._slot

    def put(self, item_id: UUID, terms: Mapping[str, int], length: int) -> None:
        """Index `item_id` with its terms (lexeme -> occurrences) and length, replacing any
        earlier content of it."""
        self.remove(item_id)
        slot = len(self._ids)
        self._slot[item_id] = slot
        self._ids.append(item_id)
        self._lengths.append(float(length))
        self._alive.append(True)
        self._total_length += length
        for term, tf in terms.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = _Postings()
            postings.slots.append(slot)
            postings.tfs.append(float(tf))

    @classmethod
    def built(
        cls,
        ids: Sequence[UUID],
        lengths: Sequence[int],
        postings: Iterable[tuple[str, Sequence[int], Sequence[int]]],
        *,
        k1: float = K1,
        b: float = B,
    ) -> Bm25Index:
        """An index of the items `ids` (their `lengths` alike), whose postings are given per
        term as (term, slots: places in `ids`, occurrences): one array per term, no loop over
        every posting."""
        index = cls(k1=k1, b=b)
        index._ids = list(ids)
        index._slot = {item_id: slot for slot, item_id in enumerate(ids)}
        for term, slots, tfs in postings:
            p = index._postings[term] = _Postings()
            p.slots.replace(np.array(slots, dtype=np.int32))
            p.tfs.replace(np.array(tfs, dtype=np.float64))
        index._lengths.replace(np.array(lengths, dtype=np.float64))
        index._alive.replace(np.ones(len(index._ids), dtype=np.bool_))
        index._total_length = float(sum(lengths))
        return index

    def remove(self, item_id: UUID) -> None:
        """Forget `item_id` (nothing when it is not indexed)."""
        slot = self._slot.pop(item_id, None)
        if slot is None:
            return
        self._ids[slot] = None
        self._alive.data[slot] = False
        self._total_length -= float(self._lengths.data[slot])
        retired = len(self._ids) - len(self._slot)
        if retired > max(_COMPACT_AFTER, len(self._slot)):
            self._compact()

    def top(self, query_terms: Iterable[str], limit: int) -> list[tuple[UUID, float]]:
        """The `limit` best-scoring items with a score above 0, best first; ties by id (as
        Postgres orders uuids)."""
        return self.scored(query_terms).top(limit)

    def scores_of(self, query_terms: Iterable[str], item_ids: Iterable[UUID]) -> dict[UUID, float]:
        """The score of each of `item_ids` that is indexed (0 when it matches no term)."""
        return self.scored(query_terms).of(item_ids)

    def scored(self, query_terms: Iterable[str]) -> Bm25Scores:
        """Every item's score for `query_terms`, computed once: for a top list and the scores
        of other items (relevance's vector candidates)."""
        return Bm25Scores(self, list(query_terms))

    def _scores(self, query_terms: Iterable[str]) -> npt.NDArray[np.float64] | None:
        """Every slot's score (retired slots 0), or None when no query term is indexed."""
        count = len(self._slot)
        postings = [p for t in set(query_terms) if (p := self._postings.get(t)) is not None]
        if not postings or count == 0:
            return None
        alive, lengths = self._alive.view(), self._lengths.view()
        avglen = self._total_length / count if self._total_length > 0 else 1.0
        scores = np.zeros(len(self._ids), dtype=np.float64)
        for p in postings:
            slots, tfs = p.slots.view(), p.tfs.view()
            live = alive[slots]
            slots, tfs = slots[live], tfs[live]
            df = len(slots)
            if df == 0:
                continue
            idf = math.log(1 + (count - df + 0.5) / (df + 0.5))
            norm = self.k1 * (1 - self.b + self.b * lengths[slots] / avglen)
            scores[slots] += idf * tfs / (tfs + norm)  # a slot is once in a term's postings
        return scores

    def _id(self, slot: int) -> UUID:
        item_id = self._ids[slot]
        assert item_id is not None  # retired slots score 0 and are never picked
        return item_id

    def _compact(self) -> None:
        """Drop retired slots: renumber the live ones and rewrite every term's postings."""
        alive = self._alive.view().astype(bool)
        renumbered = np.cumsum(alive, dtype=np.int64) - 1
        for term in list(self._postings):
            p = self._postings[term]
            slots = p.slots.view()
            live = alive[slots]
            if not live.any():
                del self._postings[term]
                continue
            p.slots.replace(renumbered[slots[live]].astype(np.int32))
            p.tfs.replace(p.tfs.view()[live])
        self._lengths.replace(self._lengths.view()[alive])
        self._alive.replace(np.ones(int(alive.sum()), dtype=np.bool_))
        self._compactions += 1
        live_ids = [item_id for item_id in self._ids if item_id is not None]
        self._ids = list(live_ids)
        self._slot = {item_id: slot for slot, item_id in enumerate(live_ids)}


class Bm25Scores:
    """One query's scores over an index, as it was when scored. Writes after that are seen by
    `of` as far as they renumber nothing: an item added since scores 0, one removed is left
    out; after a compaction (which renumbers every slot) `of` scores the query again."""

    def __init__(self, index: Bm25Index, terms: list[str]) -> None:
        self._index, self._terms = index, terms
        self._scores = index._scores(terms)
        self._compactions = index._compactions

    def top(self, limit: int) -> list[tuple[UUID, float]]:
        """The `limit` best items scoring above 0, best first; ties by id."""
        if self._scores is None:
            return []
        picked = _best_slots(self._scores, limit)
        ranked = [(self._index._id(int(slot)), float(self._scores[slot])) for slot in picked]
        return heapq.nsmallest(limit, ranked, key=lambda pair: (-pair[1], pair[0]))

    def of(self, item_ids: Iterable[UUID]) -> dict[UUID, float]:
        """The score of each of `item_ids` that is indexed (0 when it matches no term)."""
        if self._compactions != self._index._compactions:
            self._scores = self._index._scores(self._terms)
            self._compactions = self._index._compactions
        scores = self._scores
        slots = {i: self._index._slot[i] for i in item_ids if i in self._index._slot}
        if scores is None:
            return dict.fromkeys(slots, 0.0)
        return {i: float(scores[slot]) if slot < len(scores) else 0.0 for i, slot in slots.items()}


_FRACTIONS: Final = (0.9, 0.7, 0.4, 0.0)


def _best_slots(scores: npt.NDArray[np.float64], limit: int) -> npt.NDArray[np.intp]:
    """Slots holding the `limit` best scores above 0 (and any tied with the last of them).

    Most scores are 0 and many are equal (items of one template), which makes a partition of
    the whole array slow (15 ms at 100k); a few comparisons against fractions of the best score
    narrow it to the few items near the top first."""
    best = float(scores.max())
    if best <= 0:
        return np.empty(0, dtype=np.intp)
    for fraction in _FRACTIONS:
        picked = np.flatnonzero(scores >= best * fraction) if fraction else np.flatnonzero(scores)
        if len(picked) >= limit:
            break
    if len(picked) <= limit:
        return picked
    values = scores[picked]
    kth = np.partition(values, len(values) - limit)[len(values) - limit]
    best_slots: npt.NDArray[np.intp] = picked[values >= kth]
    return best_slots
