"""The summary tree's root (design 004), with no I/O: the idle roll-up over session summaries.

While edge is idle (config.json `rollup_idle_s`), the agent asks choird for the session
summaries no roll-up covers yet (`choir.memory.rollup`), has its own model write one roll-up over
them (choird stays inference-free, §11.5) and commits it as a `MemoryRollup` event. choird stores
the event as an immutable knowledge item `rollup/<ISO minute>` linked `derived_from` each summary
it covers. Everything here is bounded: at most `MAX_COVERED` summaries a roll-up, each shown up
to `SUMMARY_CHARS`, so the prompt stays small however long the agent has lived; what is left
over is the next roll-up's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from choir.core.memory.summaries.archives import ArchiveEntry, fitted, iso_minute, session_segment
from choir.core.memory.summaries.tree import ROLLUP_KEY, ROLLUP_LOC
from choir.protocol.log.events import MemoryRollup

__all__ = [
    "DEFAULT_IDLE_S",
    "MAX_COVERED",
    "ROLLUP_MARKER",
    "PendingSummary",
    "parse_rollup",
    "rollup_entry",
    "rollup_messages",
    "rollup_name",
]

DEFAULT_IDLE_S: Final = 600
"""config.json `rollup_idle_s`: how long edge waits without a user message before rolling up
(0 turns roll-ups off)."""
MAX_COVERED: Final = 20
"""Most session summaries one roll-up covers (older ones first; the rest wait their turn)."""
SUMMARY_CHARS: Final = 2_000
"""Of each summary, what the prompt shows (its head names the session, its span and who spoke)."""
ROLLUP_MARKER: Final = "Roll up these session summaries"
"""Starts the roll-up request's user message (scripted models match on it)."""

_INSTRUCTIONS: Final = """\
You keep this agent's long-term memory. Below are summaries of past sessions, oldest first. \
Write one roll-up over them for later sessions: the topics, decisions, people and open items \
that matter across sessions, with the dates they happened. Plain prose, concise, no outside \
facts; answer with the roll-up text only."""


@dataclass(frozen=True, slots=True)
class PendingSummary:
    """A session summary no roll-up covers yet, as choird lists it."""

    name: str
    text: str


def rollup_name(moment: datetime) -> str:
    """The name of a roll-up written at `moment`: `rollup/2026-11-27T14:40Z`."""
    return f"rollup/{iso_minute(moment)}"


def rollup_messages(summaries: Sequence[PendingSummary]) -> list[dict[str, object]]:
    """The chat messages of the roll-up call over (at most `MAX_COVERED` of) `summaries`."""
    parts = [
        f"## {summary.name}\n{fitted(summary.text, SUMMARY_CHARS)}"
        for summary in summaries[:MAX_COVERED]
    ]
    body = f"{ROLLUP_MARKER}.\n\n" + "\n\n".join(parts)
    return [{"role": "system", "content": _INSTRUCTIONS}, {"role": "user", "content": body}]


def parse_rollup(reply: str) -> str | None:
    """The roll-up text of a model reply; None when it wrote nothing."""
    text = reply.strip()
    return text or None


def rollup_entry(session_id: str, rev: int, event: MemoryRollup) -> ArchiveEntry:
    """The root item the roll-up committed at `rev` of `session_id` becomes: the model's text,
    headed by when it was written and what it covers."""
    rolled_at = event.name.removeprefix("rollup/")
    head = (
        f"Roll-up of {len(event.covers)} session summaries, written by the agent at "
        f"{rolled_at} (session {session_id})."
    )
    text = fitted(f"{head}\n\n{event.text.strip()}\n\nSession summaries: {', '.join(event.covers)}")
    source = {
        "session_id": session_id,
        "rev": rev,
        "rolled_at": rolled_at,
        "covers": list(event.covers),
    }
    return ArchiveEntry(event.name, text, {ROLLUP_KEY: source}, f"{ROLLUP_LOC}:{_day(rolled_at)}")


def _day(rolled_at: str) -> str:
    """The loc segment of a roll-up: its day (`rollup:2026-11-27`)."""
    return session_segment(rolled_at[:10])
