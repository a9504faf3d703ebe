"""Event records for tests, with hashes derived from (salt, rev) so a fork is easy to forge."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from choir.store.events import EventRecord


def fake_hash(rev: int, salt: str = "") -> str:
    return hashlib.sha256(f"{salt}:{rev}".encode()).hexdigest()


def make_events(first_rev: int, count: int, *, salt: str = "") -> list[EventRecord]:
    """`count` events from `first_rev` on; a different `salt` gives a forked chain."""
    now = datetime.now(UTC)
    return [
        EventRecord(
            rev=rev,
            event_type="TOOL_RESULT_COMMITTED",
            lane="edge" if rev % 2 else "core:refactor-auth",
            payload={"kind": "tool_result", "rev": rev, "data": {"items": [1, 2.5, None, "ü"]}},
            hash_prev=fake_hash(rev - 1, salt),
            hash=fake_hash(rev, salt),
            created_at=now,
        )
        for rev in range(first_rev, first_rev + count)
    ]
