"""What the embedding queue sends next (§11.9), pure: chunks waiting, in order, cut into batches.

A batch leaves when 32 chunks wait, or, after a flush was asked for (the heartbeat tick), with
whatever waits. A chunk enqueued again while it still waits keeps its place and takes the new
text: only the latest text of a knowledge item updated twice in one tick is embedded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class PendingChunks(Generic[T]):
    """Chunks waiting to be embedded, by id, each with what the queue keeps for it."""

    batch_size: int = 32
    """The most chunks per batch (§11.9)."""
    _waiting: OrderedDict[str, T] = field(default_factory=OrderedDict)
    """In queue order; an OrderedDict so taking from the front stays O(1) after many takes."""
    _flushing: bool = False

    def add(self, chunk_id: str, item: T) -> None:
        """Queue `item` for `chunk_id`; an id already waiting keeps its place, with `item`."""
        self._waiting[chunk_id] = item

    def get(self, chunk_id: str) -> T | None:
        """What waits for `chunk_id`, if it waits."""
        return self._waiting.get(chunk_id)

    def request_flush(self) -> None:
        """Send what waits now, even a partial batch."""
        self._flushing = bool(self._waiting)

    @property
    def full(self) -> bool:
        """A whole batch waits."""
        return len(self._waiting) >= self.batch_size

    def next_batch(self) -> list[tuple[str, T]] | None:
        """The next batch to send, taken off the queue; None when none is due."""
        if not (self.full or self._flushing):
            return None
        take = min(self.batch_size, len(self._waiting))
        batch = [self._waiting.popitem(last=False) for _ in range(take)]
        self._flushing = self._flushing and bool(self._waiting)
        return batch

    def __len__(self) -> int:
        return len(self._waiting)

    def take_all(self) -> list[tuple[str, T]]:
        """Everything waiting, emptying the queue (at shutdown)."""
        taken, self._waiting, self._flushing = list(self._waiting.items()), OrderedDict(), False
        return taken
