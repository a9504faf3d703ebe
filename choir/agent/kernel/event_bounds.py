"""What an event too large to travel whole is committed as: a preview, and its whole as bytes.

Pure. `externalize` is called by the commit log only for a record above `EVENT_INLINE_MAX`
(`choir.protocol.wire.artifacts`), so ordinary commits pay one length check. The preview is the same
kind of event with long strings cut (a note says how much was left out and where it is), long
lists and very wide objects shortened — tried from light to heavy cuts until it is small — and
always a valid event of its kind, in its complete JSON form (choird recomputes the chain hash from
the parsed preview, so it must re-serialize to the very same bytes).

Everything that reads the log reads the preview: the prompt (a 2 MB reply would not fit a model's
context anyway), working memory, snapshots, choird's views. The whole event is the artifact; the
agent keeps it (`CommitLog.artifacts`) and recovery reads it back where it acts on an event's
content — the calls it re-proposes after a crash.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, NamedTuple

from pydantic import ValidationError

from choir.protocol import canonical_json
from choir.protocol.log.events import EVENT_ADAPTER
from choir.protocol.wire.artifacts import EVENT_INLINE_MAX

PREVIEW_MAX: Final = 32 * 1024
"""A preview's canonical JSON stays under this many bytes (when any cut gets it there)."""
CUTS: Final = ((4096, 64), (1024, 16), (256, 4), (64, 1))
"""(characters kept per string, items kept per list or object), lightest first."""


class Externalized(NamedTuple):
    """An oversized event as committed: the preview, and the whole event's reference and bytes."""

    preview: dict[str, Any]
    artifact: dict[str, Any]
    """`{"sha256", "size"}`: the JSON form of `ArtifactRef`."""
    content: bytes
    """The whole event's canonical JSON."""


def oversized(record: bytes) -> bool:
    """Whether a record of these canonical bytes must be committed as a preview."""
    return len(record) > EVENT_INLINE_MAX


def externalize(event: dict[str, Any]) -> Externalized:
    """The preview of `event` (its complete JSON form) and the artifact holding all of it."""
    content = canonical_json(event)
    digest = hashlib.sha256(content).hexdigest()
    return Externalized(
        preview_of(event, digest),
        {"sha256": digest, "size": len(content)},
        content,
    )


def preview_of(event: dict[str, Any], digest: str) -> dict[str, Any]:
    """The first cut of `event` that is a valid event under PREVIEW_MAX bytes (else the last
    valid one): strings, lists and objects shortened, each cut saying so."""
    best: dict[str, Any] | None = None
    for chars, items in CUTS:
        candidate = _valid(_cut(event, chars, items, digest))
        if candidate is None:
            continue
        best = candidate
        if len(canonical_json(candidate)) <= PREVIEW_MAX:
            return candidate
    if best is None:  # no cut keeps the event valid: keep only the strings cut, lightly
        best = _valid(_cut(event, CUTS[0][0], None, digest))
    if best is None:
        raise ValueError(f"no preview of this {event.get('kind')} event is a valid event")
    return best


def _valid(candidate: Any) -> dict[str, Any] | None:
    """`candidate` in its complete JSON form if it is a valid event, else None."""
    try:
        dumped: dict[str, Any] = EVENT_ADAPTER.dump_python(
            EVENT_ADAPTER.validate_python(candidate), mode="json"
        )
    except ValidationError:
        return None
    return dumped


def _cut(node: Any, chars: int, items: int | None, digest: str) -> Any:
    if isinstance(node, str):
        if len(node) <= chars:
            return node
        note = f"\n[… {len(node) - chars} more characters in artifact sha256:{digest[:16]}]"
        return node[:chars] + note
    if isinstance(node, list):
        kept = node if items is None else node[:items]
        return [_cut(item, chars, items, digest) for item in kept]
    if isinstance(node, dict):
        keys = list(node) if items is None or len(node) <= items * 4 else list(node)[: items * 4]
        return {key: _cut(node[key], chars, items, digest) for key in keys}
    return node


__all__ = ["CUTS", "PREVIEW_MAX", "Externalized", "externalize", "oversized", "preview_of"]
