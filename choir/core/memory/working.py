"""Tier-1 working memory of one lane (§11.3): event window, reference summary, pending compaction.

Each lane keeps its own view of the one session log. `observe` folds committed records into it,
so the live lane and crash recovery build the same state: recovery restores the snapshot's summary
and window boundary (§13.4) and replays the log tail through `observe`. A replayed
`MemoryWriteCommitted` the snapshot does not yet reflect is applied again; one it already
reflects (its boundary is not newer) is skipped, so a compaction is never applied twice.

What a lane's window holds:
- edge: its own user messages, model outputs, tool results and replies; instructions injected
  into it; and every core completion report (`CoreStopped`, and the `CoreEventEmitted` kinds in
  `EDGE_CORE_EVENTS`), because edge must report core outcomes to the user (§7.1).
- a core job: its own model outputs and tool results, and instructions injected into it. Never a
  user message: core only sees edge's curated briefing (§7.1).

A core job's memory starts at the rev after its `CoreStarted` (`window_start_rev`), so a job
name used again later in the session starts clean. Recovery needs the log from the smallest
window boundary on, and for edge from its latest user message if that is older.

Never compacted (§11.3): the system prompt, identity files, the most recent `UserMsg` (kept here as
`latest_user`, shown in full even once it is folded), and the `CoreJobStart` (held by the core
lane). Everything else in the window is compactable.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from choir.protocol.log.events import EVENT_ADAPTER, Event, MemoryRecalled, MemoryWriteCommitted
from choir.protocol.log.lanes import EDGE_LANE
from choir.protocol.tooling.memory import ReferenceSummary

__all__ = [
    "EDGE_CORE_EVENTS",
    "HASH_REF_CHARS",
    "CommittedRecord",
    "PendingCompaction",
    "WindowEvent",
    "WorkingMemory",
    "in_window",
]

HASH_REF_CHARS: Final = 16
"""How much of an event hash prompts show; `choir.memory.query mode=hash` matches prefixes."""

EDGE_CORE_EVENTS: Final = frozenset(
    {"final_result", "error", "need_info", "plan", "partial_result"}
)
"""Core events edge must act on or may be asked about; progress chatter stays out of its window."""

_EDGE_OWN: Final = frozenset({"user_msg", "model_output", "tool_result_committed", "agent_replied"})
"""Kinds of edge's own events that belong in its window."""
_CORE_OWN: Final = frozenset({"model_output", "tool_result_committed"})
"""Kinds of a core job's own events that belong in its window."""


class CommittedRecord(Protocol):
    """A committed revision as the agent's commit log holds it (`LogEntry` fits)."""

    @property
    def rev(self) -> int: ...
    @property
    def lane(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def event(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class WindowEvent:
    """One event of a lane's window, parsed once when it is observed."""

    rev: int
    lane: str
    """The lane that committed it."""
    hash: str
    event: Event

    @property
    def ref(self) -> str:
        """The short hash reference prompts show."""
        return self.hash[:HASH_REF_CHARS]


@dataclass(frozen=True, slots=True)
class PendingCompaction:
    """A compaction call in flight: it folds every window event up to `upto_rev`."""

    upto_rev: int


@dataclass(frozen=True, slots=True)
class WorkingMemory:
    """One lane's working memory; every change returns a new value (swapped atomically)."""

    lane: str
    """`edge` or `core:<job-name>`."""
    summary: ReferenceSummary = field(default_factory=ReferenceSummary)
    """Everything folded out of the window so far."""
    window_start_rev: int = 1
    """The window boundary: events before this rev live only in the summary and the log."""
    events: tuple[WindowEvent, ...] = ()
    """The lane's unfolded window events, oldest first (prompts show the last N)."""
    latest_user: WindowEvent | None = None
    """Edge only: the most recent user message, shown in full even once folded."""
    pending: PendingCompaction | None = None
    """The compaction call in flight, if any."""
    forced: bool = False
    """A manual trigger (tool, choirctl, /compact) asked for a compaction."""
    recalled: MemoryRecalled | None = None
    """Edge only: the memories recalled for `latest_user` (design 004), from the log — so a
    replay shows the same block; a new user message clears it. Never in the window."""

    def observe(self, record: CommittedRecord, model: Event | None = None) -> WorkingMemory:
        """The memory after one committed record of the session (any lane's); `model` is its
        event parsed, when the caller has it already (else the record's JSON is parsed)."""
        kind = record.event.get("kind")
        if kind == "memory_write_committed":
            return self._replayed(record)
        if kind == "memory_recalled":
            return self._recalled(record, model)
        is_user = kind == "user_msg" and self.lane == EDGE_LANE and record.lane == EDGE_LANE
        if not is_user and (record.rev < self.window_start_rev or not in_window(self.lane, record)):
            return self
        event = model if model is not None else EVENT_ADAPTER.validate_python(record.event)
        item = WindowEvent(record.rev, record.lane, record.hash, event)
        latest_user = item if is_user else self.latest_user
        recalled = None if is_user else self.recalled
        events = self.events if record.rev < self.window_start_rev else (*self.events, item)
        # built directly, not with `dataclasses.replace` (which looks every field up by name):
        # a lane observes several records per model call
        return WorkingMemory(
            lane=self.lane,
            summary=self.summary,
            window_start_rev=self.window_start_rev,
            events=events,
            latest_user=latest_user,
            pending=self.pending,
            forced=self.forced,
            recalled=recalled,
        )

    def observe_all(self, records: Iterable[CommittedRecord]) -> WorkingMemory:
        """Replay `records` in order (recovery: the log tail after a snapshot)."""
        memory = self
        for record in records:
            memory = memory.observe(record)
        return memory

    def request_compaction(self) -> WorkingMemory:
        """A manual trigger: `should_compact` says yes next (a call in flight already counts)."""
        return self if self.pending is not None else replace(self, forced=True)

    def begin(self, upto_rev: int) -> WorkingMemory:
        """A compaction call folding events up to `upto_rev` was sent."""
        return replace(self, pending=PendingCompaction(upto_rev), forced=False)

    def abandon(self) -> WorkingMemory:
        """The compaction call failed: keep the window as it is and retry at the next trigger."""
        return replace(self, pending=None)

    def folded(self, summary: ReferenceSummary, upto_rev: int) -> WorkingMemory:
        """The memory once events up to `upto_rev` live in `summary` instead of the window."""
        kept = tuple(item for item in self.events if item.rev > upto_rev)
        return replace(
            self, summary=summary, window_start_rev=upto_rev + 1, events=kept, pending=None
        )

    def window(self, size: int) -> tuple[WindowEvent, ...]:
        """The events the prompt shows, oldest first: the last `size` compactable events, plus
        the latest user message wherever it falls (first, once it is folded or cut off)."""
        shown = self.compactable()[-size:] if size > 0 else ()
        user = self.latest_user
        if user is None:
            return shown
        at = bisect_right(shown, user.rev, key=_rev)  # `events` are in rev order
        return (*shown[:at], user, *shown[at:])

    def compactable(self) -> tuple[WindowEvent, ...]:
        """Window events that count against the window: all but the latest user message."""
        events, user = self.events, self.latest_user
        if user is None:
            return events
        # found by rev (`events` are in rev order), not by scanning every event: prompts and
        # the compaction trigger ask for this at every model call
        at = bisect_left(events, user.rev, key=_rev)
        if at < len(events) and events[at] is user:
            return events[:at] + events[at + 1 :]
        if user.rev < self.window_start_rev:
            return events  # folded: not among them
        return tuple(item for item in events if item is not user)

    def _recalled(self, record: CommittedRecord, model: Event | None) -> WorkingMemory:
        if self.lane != EDGE_LANE or record.lane != EDGE_LANE:
            return self
        event = model if isinstance(model, MemoryRecalled) else None
        return replace(self, recalled=event or MemoryRecalled.model_validate(record.event))

    def _replayed(self, record: CommittedRecord) -> WorkingMemory:
        if record.event.get("summary_lane") != self.lane:
            return self
        event = MemoryWriteCommitted.model_validate(record.event)
        if event.window_start_rev <= self.window_start_rev:
            return self  # already reflected: committed by this lane, or in the snapshot
        return self.folded(self.summary.apply(event.delta), event.window_start_rev - 1)


def _rev(item: WindowEvent) -> int:
    return item.rev


def in_window(lane: str, record: CommittedRecord) -> bool:
    """Whether a committed record belongs in `lane`'s event window (see the module docstring)."""
    event = record.event
    kind = event.get("kind")
    if kind == "injected_instruction":
        return bool(event.get("target") == lane)
    is_edge = lane == EDGE_LANE
    if record.lane == lane and kind in (_EDGE_OWN if is_edge else _CORE_OWN):
        return True
    if not is_edge:
        return False
    if kind == "core_stopped":
        return True
    return kind == "core_event_emitted" and event["event"].get("kind") in EDGE_CORE_EVENTS
