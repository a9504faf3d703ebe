"""The summary tree (from seed design 004), with no I/O: leaves, branches, and their links.

Leaves are the compaction archives (`archives`): each the model's summary of one folded window,
pointing at its source events by session and rev range; and a session's tool sequence — its
tool-call rows (`tool_synthesis`, one computed sentence a call) in order, one item
`tools/<session>/<last rev>` per close of the session (a resumed session's later close holds its
later calls). A branch is a session's summary — the
one the agent's model writes at graceful stop (`SessionSummary`) — stored at the session's
close as a knowledge item `summary/<session>` and linked to the session's archives by
`derived_from` edges. A search hit on a branch expands to its leaves, a leaf to its source
events (`choir.memory.query` mode `expand`). Times are ISO minutes; the head of each summary says
who took part and how much each said or did. The root is a roll-up over sessions the agent's
model writes while edge is idle (`rollup`): an item `rollup/<ISO minute>` linked `derived_from`
each session summary it covers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Final

from choir.core.memory.chunks import MemoryChunk
from choir.core.memory.summaries.archives import (
    ARCHIVE_KEY,
    ArchiveEntry,
    fitted,
    iso_minute,
    session_segment,
)
from choir.protocol.log.events import (
    AgentReplied,
    Event,
    ModelOutput,
    SessionSummary,
    ToolCallCommitted,
    UserMsg,
)

__all__ = [
    "ROLLUP_KEY",
    "ROLLUP_LOC",
    "SUMMARY_KEY",
    "SUMMARY_LOC",
    "TOOLS_KEY",
    "TOOLS_LOC",
    "TREE_KEYS",
    "session_summary_entry",
    "summary_name",
    "tool_sequence_entry",
    "tree_depth",
]

SUMMARY_KEY: Final = "session_summary"
"""The metadata key of a session summary item (a branch of the tree)."""
SUMMARY_LOC: Final = "summary"
"""The loc root of session summaries, `summary:<session>`."""
TOOLS_KEY: Final = "tool_sequence"
"""The metadata key of a tool-sequence item (a leaf under its session's summary)."""
TOOLS_LOC: Final = "tools"
"""The loc root of tool sequences, `tools:<session>`."""
ROLLUP_KEY: Final = "memory_rollup"
"""The metadata key of a roll-up item (a root of the tree)."""
ROLLUP_LOC: Final = "rollup"
"""The loc of roll-ups: a search with `loc=rollup` finds roots only."""
TREE_KEYS: Final = (ARCHIVE_KEY, SUMMARY_KEY, ROLLUP_KEY, TOOLS_KEY)
"""Metadata keys of the tree's items: every one of them is immutable."""


def summary_name(session_id: str) -> str:
    """The name of `session_id`'s summary item."""
    return f"summary/{session_segment(session_id)}"


def who_said_what(events: Iterable[Event]) -> str:
    """`user 4 messages, agent 5 replies, 3 tool calls`: who took part and how much."""
    counts: Counter[str] = Counter()
    for event in events:
        if isinstance(event, UserMsg):
            counts["user messages"] += 1
        elif isinstance(event, AgentReplied):
            counts["agent replies"] += 1
        elif isinstance(event, ToolCallCommitted):
            counts["tool calls"] += 1
        elif isinstance(event, ModelOutput):
            counts["model outputs"] += 1
    order = ("user messages", "agent replies", "model outputs", "tool calls")
    return ", ".join(f"{counts[key]} {key}" for key in order if counts[key]) or "no messages"


def session_summary_entry(
    session_id: str,
    summary: SessionSummary,
    *,
    first_at: datetime | None,
    last_at: datetime | None,
    participation: str,
    archives: Sequence[str],
) -> ArchiveEntry:
    """The branch item of `session_id`: the agent's summary, headed by when and who, listing
    the archives (leaves) it is linked to."""
    span = " to ".join(iso_minute(moment) for moment in (first_at, last_at) if moment is not None)
    head = f"Session summary of {session_id}" + (f", {span}" if span else "")
    lines = [f"{head} (written by the agent at its end; {participation}).", "", summary.summary]
    for label, items in (
        ("Topics", summary.topics),
        ("Decisions", summary.decisions),
        ("Open items", summary.open_items),
    ):
        if items:
            lines += ["", f"{label}: " + "; ".join(items)]
    if archives:
        lines += ["", "Compaction archives: " + ", ".join(archives)]
    source = {
        "session_id": session_id,
        "first_at": iso_minute(first_at) if first_at else None,
        "last_at": iso_minute(last_at) if last_at else None,
        "archives": list(archives),
    }
    loc = f"{SUMMARY_LOC}:{session_segment(session_id)}"
    text = fitted("\n".join(lines))
    return ArchiveEntry(summary_name(session_id), text, {SUMMARY_KEY: source}, loc)


def tool_sequence_entry(session_id: str, rows: Sequence[MemoryChunk]) -> ArchiveEntry | None:
    """The leaf of `session_id`'s tool calls among `rows` (its tool-call rows, any order), one
    line each by rev; None without any."""
    ordered = sorted(rows, key=lambda row: row.last_rev or 0)
    if not ordered:
        return None
    first, last = ordered[0].first_rev or 0, ordered[-1].last_rev or 0
    head = f"Tool calls of session {session_id}, revs {first}-{last} ({len(ordered)} calls)."
    lines = [head, "", *(f"rev {row.last_rev}: {row.text}" for row in ordered)]
    segment = session_segment(session_id)
    source = {"session_id": session_id, "from_rev": first, "upto_rev": last, "calls": len(ordered)}
    return ArchiveEntry(
        f"{TOOLS_LOC}/{segment}/{last}",
        fitted("\n".join(lines)),
        {TOOLS_KEY: source},
        f"{TOOLS_LOC}:{segment}",
    )


def tree_depth(archives: int, summaries: int, linked: int, roots: int = 0) -> int:
    """Levels the tree has: 0 empty, 1 leaves only, 2 with branches over leaves, 3 with a root
    (a roll-up) over branches; `linked` counts branches with at least one leaf."""
    if roots and summaries:
        return 3 if linked else 2
    if summaries and linked:
        return 2
    return 1 if archives or summaries or roots else 0
