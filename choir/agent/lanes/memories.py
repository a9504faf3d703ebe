"""Each live lane's working memory (§11.3), folded from every commit as it happens.

Its own module because the lanes and the compaction driver both read and swap these memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from choir.agent.kernel.commitlog import LogEntry
from choir.core.memory.working import WorkingMemory
from choir.protocol import Event


@dataclass(slots=True)
class Memories:
    """Each live lane's working memory, folded from every commit as it happens."""

    lanes: dict[str, WorkingMemory] = field(default_factory=dict)

    def track(self, memory: WorkingMemory) -> None:
        self.lanes[memory.lane] = memory

    def forget(self, lane: str) -> None:
        self.lanes.pop(lane, None)

    def observe(self, entry: LogEntry, model: Event | None = None) -> None:
        """Fold `entry` into every lane's memory; `model` is its event's model when the caller
        has it (`CommitLog.fresh_model`), so it is not parsed again."""
        for lane, memory in list(self.lanes.items()):
            self.lanes[lane] = memory.observe(entry, model)


__all__ = ["Memories"]
