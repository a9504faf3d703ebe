"""The unit of session memory (§11.4-11.5): one logical block of a session, as stored.

Shared by the chunker (events → chunks, `core/memory/chunking`) and the memory store
(`daemon/memory/store`), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Tier(StrEnum):
    """Where a session chunk lives (§23.2's `tier` column)."""

    MID_TERM = "mid_term"
    LONG_TERM_SUMMARY = "long_term_summary"
    LONG_TERM_DETAIL = "long_term_detail"


class ChunkKind(StrEnum):
    """What a chunk holds: the logical block of §11.4 step 1 it was cut along."""

    TOOL_CALL = "tool_call"
    """A tool call with its result."""
    SKILL_PHASE = "skill_phase"
    """The events of one skill state."""
    MESSAGES = "messages"
    """User messages and model output, cut at the size cap."""
    SUMMARY = "summary"
    """A part of the agent's session summary (tier `long_term_summary`)."""
    TOOL_DESCRIPTION = "tool_description"
    """One tool call told in one past-tense sentence (`tool_synthesis`), keyed by `-rev`."""


@dataclass(frozen=True, slots=True)
class MemoryChunk:
    """One chunk of one session, numbered from 0 within its (session, tier)."""

    index: int
    text: str
    kind: ChunkKind
    first_rev: int | None = None
    """The first session event (revision) it was cut from; None for summary chunks."""
    last_rev: int | None = None
