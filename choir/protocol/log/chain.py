"""The hash chain over committed events (§7.4, §13.1): canonical bytes and chained SHA-256.

Every committed event carries `hash = sha256(hash_prev + canonical_json(record))`, where `record` is
`{"rev", "lane", "ts", "event"}` with `event` in its JSON form (`model_dump(mode="json")`) and `ts`
formatted by `format_ts` — plus `"artifact": {"sha256", "size"}` when the event is a preview of a
larger one (`choir.protocol.wire.artifacts`), so the chain covers the whole content too. Keys are
sorted, there is no whitespace, text is UTF-8 — so the agent that commits and choird that verifies
get the same bytes from the same record.

These functions work on plain dicts so the arbiter can seal commits without a pydantic round
trip on its hot path.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import orjson

GENESIS_HASH: Final = "0" * 64
"""The `hash_prev` of a session's first event (rev 1)."""

_CANONICAL: Final = orjson.OPT_SORT_KEYS


def canonical_json(payload: dict[str, Any]) -> bytes:
    """`payload` as canonical JSON: sorted keys, no whitespace, UTF-8.

    `payload` must already be JSON-shaped (str keys; str, int, float, bool, None, list, dict
    values), e.g. the output of `model_dump(mode="json")`.
    """
    return orjson.dumps(payload, option=_CANONICAL)


def chain_hash(hash_prev: str, canonical: bytes) -> str:
    """The hex SHA-256 of `hash_prev`'s ASCII bytes followed by `canonical`."""
    return hashlib.sha256(hash_prev.encode("ascii") + canonical).hexdigest()


def record_bytes(
    rev: int, lane: str, ts: str, event: dict[str, Any], artifact: dict[str, Any] | None = None
) -> bytes:
    """The canonical bytes of one committed record: what its chain hash is taken over."""
    record = {"event": event, "lane": lane, "rev": rev, "ts": ts}
    if artifact is not None:
        record["artifact"] = artifact
    return orjson.dumps(record, option=_CANONICAL)


def commit_hash(
    hash_prev: str,
    rev: int,
    lane: str,
    ts: str,
    event: dict[str, Any],
    artifact: dict[str, Any] | None = None,
) -> str:
    """The chain hash of one committed event, from its parts in JSON form."""
    return chain_hash(hash_prev, record_bytes(rev, lane, ts, event, artifact))


def seal_record(
    hash_prev: str, rev: int, lane: str, ts: str, event: dict[str, Any]
) -> dict[str, Any]:
    """The wire dict of a committed event (the JSON form of `CommittedEvent`), hash included."""
    return {
        "rev": rev,
        "lane": lane,
        "ts": ts,
        "hash_prev": hash_prev,
        "hash": commit_hash(hash_prev, rev, lane, ts, event),
        "event": event,
    }
