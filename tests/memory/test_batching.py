"""What the embedding queue sends next (pure state)."""

from __future__ import annotations

from choir.daemon.memory.embedding.batching import PendingChunks


def ids(batch: list[tuple[str, str]] | None) -> list[str] | None:
    return None if batch is None else [chunk_id for chunk_id, _ in batch]


def test_a_batch_leaves_when_full_in_queue_order() -> None:
    pending: PendingChunks[str] = PendingChunks(batch_size=3)
    for n in range(7):
        pending.add(f"c{n}", f"text {n}")
    assert ids(pending.next_batch()) == ["c0", "c1", "c2"]
    assert ids(pending.next_batch()) == ["c3", "c4", "c5"]
    assert pending.next_batch() is None  # one waits for a flush
    assert len(pending) == 1


def test_a_flush_sends_the_partial_rest_then_stops() -> None:
    pending: PendingChunks[str] = PendingChunks(batch_size=3)
    for n in range(4):
        pending.add(f"c{n}", f"text {n}")
    pending.request_flush()
    assert ids(pending.next_batch()) == ["c0", "c1", "c2"]
    assert ids(pending.next_batch()) == ["c3"]
    assert pending.next_batch() is None
    pending.add("c4", "text 4")
    assert pending.next_batch() is None  # the flush was spent: the next one waits again


def test_a_flush_of_nothing_is_not_remembered() -> None:
    pending: PendingChunks[str] = PendingChunks(batch_size=3)
    pending.request_flush()
    pending.add("c0", "text 0")
    assert pending.next_batch() is None


def test_an_id_added_again_keeps_its_place_with_the_new_item() -> None:
    pending: PendingChunks[str] = PendingChunks(batch_size=3)
    pending.add("a", "old")
    pending.add("b", "b")
    pending.add("a", "new")
    pending.add("c", "c")
    assert pending.next_batch() == [("a", "new"), ("b", "b"), ("c", "c")]


def test_take_all_empties_the_queue() -> None:
    pending: PendingChunks[str] = PendingChunks(batch_size=3)
    pending.add("a", "1")
    pending.request_flush()
    assert pending.take_all() == [("a", "1")]
    assert len(pending) == 0
    assert pending.next_batch() is None
