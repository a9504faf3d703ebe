"""Compaction archives (from seed design 002): what a fold leaves behind, with no I/O.

Each working-memory compaction names an immutable archive entry — the folded window's summary,
written by the agent's model — and marks the lane's history with that name: the
`MemoryWriteCommitted` event carries the `CompactionArchive`, and the summary text the lane
keeps ends with `[archived as <name>]`, so the model can open the archive by name later
(`choir.memory.query`, store knowledge). choird stores the entry when the event is durable
(`choir.daemon.memory.closing.archives`); the text it stores is computed here from the event alone,
so the two paths that may store it (at durability, at the session's close) write the same entry.

Names are `archive/<session>/<rev>`: the session id without its `s-` prefix (16 hex digits,
unique per agent in practice) and the last rev folded (one fold per rev: a rev belongs to one
lane's window). Readable, and generated from nothing but the fold itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from choir.protocol.log.events import CompactionArchive, MemoryWriteCommitted

__all__ = [
    "ARCHIVE_KEY",
    "ARCHIVE_LOC",
    "ArchiveEntry",
    "archive_entry",
    "archive_marker",
    "archive_name",
    "fitted",
    "iso_minute",
    "marked",
    "session_segment",
]

ARCHIVE_KEY: Final = "compaction_archive"
"""The metadata key of an archive item (where it came from): what makes it immutable to every
write (`choir.store.knowledge.archives`)."""
TEXT_MAX_BYTES: Final = 32 * 1024
"""The knowledge store's limit on a text (`choir.store.knowledge.items.KNOWLEDGE_MAX_BYTES`): a tree
item's text is cut to it, never refused — a refusal would stop the session's close."""
ARCHIVE_LOC: Final = "archive"
"""The loc root (design 003) of archive items, `archive:<session>`: a search with `loc=archive`
finds archives only."""


def archive_name(session_id: str, upto_rev: int) -> str:
    """The generated name of the archive of a fold of `session_id` up to `upto_rev`."""
    return f"archive/{session_segment(session_id)}/{upto_rev}"


def iso_minute(moment: datetime) -> str:
    """`moment` in UTC to the minute, as archives and summaries show time: `2026-11-27T13:52Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


def archive_marker(name: str) -> str:
    """The compact marker the lane's summary keeps for the archive `name`."""
    return f"[archived as {name}]"


def marked(summary_update: str, name: str) -> str:
    """`summary_update` ending with the marker of the archive `name`."""
    marker = archive_marker(name)
    return f"{summary_update.rstrip()} {marker}" if summary_update.strip() else marker


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """The knowledge item an archive becomes: its name, text and metadata."""

    name: str
    text: str
    metadata: dict[str, Any]
    """`{"compaction_archive": {session_id, lane, from_rev, upto_rev, marker_rev, archived_at}}`."""
    loc: str
    """`archive:<session>`."""
    owner: str = ""
    """The user of the session it was derived from (its bound DM; "": none): the item is that
    user's (`choir.core.memory.access.Viewer`)."""


def archive_entry(session_id: str, rev: int, event: MemoryWriteCommitted) -> ArchiveEntry | None:
    """The entry the compaction committed at `rev` left; None when it left none (an event
    written before archives)."""
    archive = event.archive
    if archive is None:
        return None
    upto = event.window_start_rev - 1
    summary = _summary_of(event, archive)
    header = (
        f"Compaction archive of the {event.summary_lane} lane, session {session_id}, "
        f"revs {archive.folded_from_rev}-{upto}, archived {archive.archived_at}."
    )
    source = {
        "session_id": session_id,
        "lane": event.summary_lane,
        "from_rev": archive.folded_from_rev,
        "upto_rev": upto,
        "marker_rev": rev,
        "archived_at": archive.archived_at,
    }
    loc = f"{ARCHIVE_LOC}:{session_segment(session_id)}"
    text = fitted(f"{header}\n\n{summary}")
    return ArchiveEntry(archive.name, text, {ARCHIVE_KEY: source}, loc)


def fitted(text: str, max_bytes: int = TEXT_MAX_BYTES) -> str:
    """`text`, cut to `max_bytes` of UTF-8 (marked where it was cut)."""
    if len(text.encode()) <= max_bytes:
        return text
    mark = " …[cut]"
    kept = text.encode()[: max_bytes - len(mark.encode())].decode(errors="ignore")
    return kept + mark


def session_segment(session_id: str) -> str:
    """The session id as a name and loc segment (lowercase letters, digits, `._-`), without its
    `s-` prefix."""
    segment = "".join(c if c.isalnum() or c in "._-" else "-" for c in session_id.lower())
    return segment.removeprefix("s-") or "session"


def _summary_of(event: MemoryWriteCommitted, archive: CompactionArchive) -> str:
    """What the model wrote of the folded window: its summary update without the marker, and
    the fact it added."""
    text = event.delta.summary_update.rstrip().removesuffix(archive_marker(archive.name))
    fact = event.delta.add_fact
    if fact is not None:
        text = f"{text.rstrip()}\n\nFact: {fact.key} = {fact.value}"
    return text.strip() or "(the model wrote no summary text for this window)"
