"""The session's commit log (§7.4): one ordered, hash-chained list of committed events.

The log is the runtime authority of a session; choird's `session_events` is its durable replica
(§4 inv. 4). Appends are synchronous and only ever happen on the event loop's thread, so commits
are serialized by construction: no append spans an await. Entries keep events in their JSON form
(what gets hashed and shipped), so a commit costs one canonical encoding and one SHA-256.

Secret values never enter the log: the canonical bytes of each event are scanned for the
session's secrets (`choir.logs.redaction`, one regex, nothing when none is registered) and an
event that holds one is committed with it replaced by `[REDACTED]` — whatever a tool printed
(`git credential fill`, an Authorization header) never reaches choird, Postgres, the model
provider or `session events`.

An event whose record is too large to travel whole is committed as a preview plus an artifact
(`event_bounds`): the entry holds the preview and the reference, the log keeps the whole event's
bytes in `artifacts` until choird has them (and after, for recovery to read back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

import orjson

from choir.agent.kernel.event_bounds import externalize, oversized
from choir.errors import ChoirError
from choir.logs.redaction import mentions_secret, redact_data
from choir.protocol import GENESIS_HASH, Event, chain_hash, commit_hash
from choir.protocol.lenient_json import without_lone_surrogates
from choir.protocol.log.chain import record_bytes
from choir.protocol.log.committed import event_json
from choir.protocol.log.events import EVENT_ADAPTER

Listener = Callable[["LogEntry"], None]


_second_cache: list[tuple[int, str]] = [(-1, "")]


def now_ts() -> str:
    """The current instant in the wire's one timestamp form (see `choir.protocol.format_ts`).

    Commits are hot: the date-and-time prefix is formatted once per second, not per commit, and
    the clock is read in integer nanoseconds (no float arithmetic, one %-format).
    """
    now = time.time_ns()
    second = now // 1_000_000_000
    cached_second, prefix = _second_cache[0]
    if second != cached_second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second_cache[0] = (second, prefix)
    return "%s%06dZ" % (prefix, now % 1_000_000_000 // 1000)  # noqa: UP031  # cheaper than f""


class LogEntry(NamedTuple):
    """One committed revision: what `CommittedEvent` carries, with the event as JSON.

    A NamedTuple rather than a dataclass: it is immutable and about twice as cheap to build,
    and one is built per commit.
    """

    rev: int
    lane: str
    ts: str
    hash_prev: str
    hash: str
    event: dict[str, Any]
    artifact: dict[str, Any] | None = None
    """`{"sha256", "size"}` when `event` is the preview of a larger event (`event_bounds`)."""

    @property
    def kind(self) -> str:
        return str(self.event["kind"])

    def wire(self) -> dict[str, Any]:
        """The JSON form of `CommittedEvent` (heartbeat patches, snapshots, tails)."""
        wire = {
            "rev": self.rev,
            "lane": self.lane,
            "ts": self.ts,
            "hash_prev": self.hash_prev,
            "hash": self.hash,
            "event": self.event,
        }
        if self.artifact is not None:
            wire["artifact"] = self.artifact
        return wire

    def model(self) -> Event:
        """The event as its typed model (parsing costs; keep it off hot paths)."""
        return EVENT_ADAPTER.validate_python(self.event)


_new_entry: Final = tuple.__new__
"""Builds a `LogEntry` from all its fields in C: a NamedTuple's own `__new__` is a Python function
(keywords, defaults) costing about 0.2 µs more, of a commit's 4."""


class ChainError(ChoirError):
    """Records that do not form a contiguous, correctly hashed chain."""


class CommitLog:
    """Append-only, hash-chained, readable from any revision.

    A log restored after a crash starts at a base revision (the snapshot's) rather than at 1;
    revisions at or below the base are not held in memory.
    """

    __slots__ = (
        "_base_hash",
        "_base_rev",
        "_entries",
        "_fresh",
        "_head_hash",
        "_head_rev",
        "_listeners",
        "artifacts",
    )

    def __init__(self, *, base_rev: int = 0, base_hash: str = GENESIS_HASH) -> None:
        self._entries: list[LogEntry] = []
        self._fresh: tuple[dict[str, Any], Event] | None = None
        """While `commit` runs the listeners: the JSON it committed and the model it came from."""
        self.artifacts: dict[str, bytes] = {}
        """The whole events behind previews, by sha256: committed here, or read back from
        choird on a resume."""
        self._base_rev = base_rev
        self._base_hash = base_hash
        self._head_rev = base_rev
        self._head_hash = base_hash
        self._listeners: list[Listener] = []

    @property
    def head_rev(self) -> int:
        return self._head_rev

    @property
    def head_hash(self) -> str:
        return self._head_hash

    @property
    def base_rev(self) -> int:
        return self._base_rev

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(self._entries)

    def append(self, lane: str, event: dict[str, Any]) -> LogEntry:
        """Commit one event (JSON form) for `lane`; returns the sealed entry.

        `event` must be the event model's complete JSON form (defaults included), or choird's
        recomputed hash will not match; only hot paths pinned by tests build it by hand —
        everything else uses `commit`. An event holding a secret is committed redacted: the
        entry's `event` is then a scrubbed copy (`event` itself is left as it was).
        """
        rev = self._head_rev + 1
        prev = self._head_hash
        ts = now_ts()
        try:
            record = record_bytes(rev, lane, ts, event)
        except orjson.JSONEncodeError:
            # a lone surrogate (no UTF-8 for it) from a source that let one through: commit
            # U+FFFD in its place, so the event is hashed, shipped and stored as it is kept
            event = without_lone_surrogates(event)
            record = record_bytes(rev, lane, ts, event)
        if mentions_secret(record):
            event = redact_data(event)
            record = record_bytes(rev, lane, ts, event)
        artifact = None
        if oversized(record):  # after redaction: the artifact holds what was redacted
            event, artifact, content = externalize(event)
            self.artifacts[artifact["sha256"]] = content
            record = record_bytes(rev, lane, ts, event, artifact)
        digest = chain_hash(prev, record)
        entry = _new_entry(LogEntry, (rev, lane, ts, prev, digest, event, artifact))
        self._entries.append(entry)
        self._head_rev, self._head_hash = rev, digest
        for listener in self._listeners:
            listener(entry)
        return entry

    def commit(self, lane: str, event: Event) -> LogEntry:
        """Commit one event model for `lane`."""
        committed = event_json(event)
        self._fresh = (committed, event)
        try:
            return self.append(lane, committed)
        finally:
            self._fresh = None

    def fresh_model(self, entry: LogEntry) -> Event | None:
        """For a listener of the entry `commit` is committing: the event model it committed,
        when the entry holds exactly that model's JSON (not redacted, not a preview); else None.

        Listeners that need the model (each lane's working memory) take it instead of parsing
        the JSON back (~20 µs per commit, several commits per model call).
        """
        fresh = self._fresh
        return fresh[1] if fresh is not None and entry.event is fresh[0] else None

    def since(self, rev: int) -> list[LogEntry]:
        """Every entry after `rev` (the patches of a heartbeat whose base is `rev`)."""
        start = max(0, rev - self._base_rev)
        return self._entries[start:]

    def entry(self, rev: int) -> LogEntry:
        index = rev - self._base_rev - 1
        if index < 0 or index >= len(self._entries):
            raise KeyError(rev)
        return self._entries[index]

    def resolved(self, entry: LogEntry) -> LogEntry:
        """`entry` with its whole event when it is a preview whose artifact is held here; else
        `entry` itself. Recovery reads events through this where it acts on their content."""
        if entry.artifact is None:
            return entry
        content = self.artifacts.get(str(entry.artifact["sha256"]))
        return entry if content is None else entry._replace(event=orjson.loads(content))

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` with every new entry; returns the unsubscribe callable."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def find(self, text: str, *, limit: int = 20) -> list[LogEntry]:
        """Newest-first entries whose hash starts with `text` or whose JSON mentions it.

        Backs `choir.memory.query store=working` (§11.3): keyword or hash reference over the
        whole in-memory log.
        """
        needle = text.casefold()
        found: list[LogEntry] = []
        for entry in reversed(self._entries):
            if entry.hash.startswith(needle) or needle in _searchable(entry):
                found.append(entry)
                if len(found) >= limit:
                    break
        return found

    def verify(self) -> None:
        """Recompute every hash; raises ChainError at the first break."""
        problem = chain_problem(self._entries, self._base_rev, self._base_hash)
        if problem:
            raise ChainError(problem)

    @classmethod
    def restore(
        cls, records: Iterable[LogEntry], *, base_rev: int = 0, base_hash: str = GENESIS_HASH
    ) -> CommitLog:
        """A log continuing from (`base_rev`, `base_hash`) with `records`, chain verified."""
        log = cls(base_rev=base_rev, base_hash=base_hash)
        log._entries = list(records)
        log.verify()
        if log._entries:
            log._head_rev, log._head_hash = log._entries[-1].rev, log._entries[-1].hash
        return log


def chain_problem(entries: Iterable[LogEntry], base_rev: int, base_hash: str) -> str | None:
    """Why `entries` do not continue the chain at (`base_rev`, `base_hash`); None if they do."""
    rev, prev = base_rev, base_hash
    for entry in entries:
        if entry.rev != rev + 1:
            return f"rev {entry.rev} does not follow rev {rev}"
        if entry.hash_prev != prev:
            return f"rev {entry.rev}: hash_prev does not match the hash of rev {rev}"
        digest = commit_hash(prev, entry.rev, entry.lane, entry.ts, entry.event, entry.artifact)
        if digest != entry.hash:
            return f"rev {entry.rev}: hash does not match its content"
        rev, prev = entry.rev, entry.hash
    return None


def entry_from_wire(record: dict[str, Any]) -> LogEntry:
    """A `LogEntry` from the JSON form of a `CommittedEvent` (as choird returns tails)."""
    return LogEntry(
        int(record["rev"]),
        str(record["lane"]),
        str(record["ts"]),
        str(record["hash_prev"]),
        str(record["hash"]),
        dict(record["event"]),
        dict(record["artifact"]) if record.get("artifact") else None,
    )


def _searchable(entry: LogEntry) -> str:
    """The event's values (not its keys) as one lower-cased text."""
    return "\n".join(_values(entry.event)).casefold()


def _values(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _values(item)
    elif node is not None:
        yield str(node)
