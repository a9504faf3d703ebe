"""The lock table of §9: who holds what, who waits, and whom a change lets in.

Pure — no asyncio, no I/O; the clock is injected — so every rule is tested as a table of
(held state, request) -> granted. `choir.agent.kernel.locks` wraps it in asyncio futures.

The rules, between different owners (an owner never conflicts with its own locks):
- Same resource: S is compatible with S; X conflicts with every other lock (§9.1).
- Hierarchy (§9.2): `workspace` dominates every `file:<path>`. workspace:X conflicts with any file
  lock; workspace:S means "reading the whole tree", so it conflicts with any file X and is
  compatible with file S. `choirtmp` and the other namespaces are independent of the workspace.
- Dirty read (§9.4): edge's file:<path>:S ignores a core's workspace:X — and, while a core holds
  workspace:X, also ignores the reservations below — so edge can answer questions during `exec`.
- Writer preference (§9.4): a queued waiter reserves its X locks. A request that arrives later —
  a new request, or a waiter behind it in the queue — is not granted a lock that would conflict
  with a reservation. So new S grants stop while a writer waits, and writers are served in
  arrival order; the first waiter is blocked by holders only, which is why the queue always
  drains once holders release (no deadlock, §9.4).
- Atomic locksets (§9.3): a waiter holds nothing until its whole lockset is grantable.
- No S-to-X upgrade and no re-acquire (§9.1): asking for a resource the owner already holds or
  already waits for raises LockUsageError.

- Directories (§9.2 hierarchy): a file key names a path, and a lock on a directory covers
  everything under it — `file:src` conflicts with `file:src/a.py` exactly as two locks on one
  resource would (S with S compatible, X with anything not), and `file:.` (the root, a whole-tree
  search) with every file key. Keys are resolved paths (symlinks followed inside the workspace,
  see `choir.agent.kernel.dispatch`), so one file has one key whatever name a tool used for it.
  Ancestors are looked up by key; descendants through `_below`, a count per directory key of the
  locks held under it, so no check scans the held keys (only, when something is under a
  requested directory, the requester's own few locks, which never conflict with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple, final

from choir.core.locks.lockset import (
    EDGE,
    KIND_FILE,
    KIND_WORKSPACE,
    ROOT_KEY,
    WORKSPACE,
    LockEntry,
    Lockset,
    LockUsageError,
    Mode,
    check_owner,
    entry_of,
)

_NOBODY: tuple[Waiter, ...] = ()


@final
class Waiter:
    """A queued request. It holds nothing until its whole lockset is granted at once."""

    __slots__ = ("lockset", "owner", "since")

    def __init__(self, owner: str, lockset: Lockset, since: float) -> None:
        self.owner = owner
        self.lockset = lockset
        self.since = since
        """Monotonic time the request was queued."""

    def __repr__(self) -> str:
        return f"Waiter({self.owner!r}, {self.lockset!r})"


@dataclass(frozen=True, slots=True)
class LockWait:
    """One owner waiting for one resource (for status and the TUI)."""

    owner: str
    mode: Mode
    since: float
    """Monotonic time the owner started waiting."""


@dataclass(frozen=True, slots=True)
class LockInfo:
    """The state of one resource that is held or waited for."""

    resource: str
    mode: Literal["FREE", "S", "X"]
    holders: tuple[str, ...]
    """The X owner, or the S holders sorted; the S count is their number."""
    waiters: tuple[LockWait, ...]
    """Queued requests naming this resource, in FIFO order."""
    held_since: float | None
    """Monotonic time the resource left FREE; None while it is FREE."""


class Revocation(NamedTuple):
    """What `release_all` did: waiters it removed from the queue, and waiters it let in."""

    withdrawn: tuple[Waiter, ...]
    granted: tuple[Waiter, ...]


@final
class _Reservations:
    """The X locks of queued waiters, indexed so a check never scans the queue."""

    __slots__ = ("below", "by_resource", "files")

    def __init__(self) -> None:
        self.by_resource: dict[str, int] = {}
        self.below: dict[str, int] = {}
        """directory key -> reserved file X locks under it."""
        self.files = 0

    def add(self, entries: tuple[LockEntry, ...]) -> None:
        for resource, exclusive, kind, ancestors in entries:
            if exclusive:
                _increment(self.by_resource, resource)
                self.files += kind == KIND_FILE
                for ancestor in ancestors:
                    _increment(self.below, ancestor)

    def remove(self, entries: tuple[LockEntry, ...]) -> None:
        for resource, exclusive, kind, ancestors in entries:
            if exclusive:
                _decrement(self.by_resource, resource)
                self.files -= kind == KIND_FILE
                for ancestor in ancestors:
                    _decrement(self.below, ancestor)

    def block(self, owner: str, entries: tuple[LockEntry, ...], dirty_read: bool) -> bool:
        """True if any lock of `entries` conflicts with a reserved X lock."""
        reserved = self.by_resource
        workspace = WORKSPACE in reserved
        for resource, exclusive, kind, ancestors in entries:
            if kind == KIND_FILE:
                if dirty_read and not exclusive and owner == EDGE:
                    continue
                if workspace or resource in reserved or resource in self.below:
                    return True
                for ancestor in ancestors:
                    if ancestor in reserved:
                        return True
            elif kind == KIND_WORKSPACE:
                if workspace or self.files:
                    return True
            elif resource in reserved:
                return True
        return False


@final
class LockTable:
    """Per-resource FREE / S(holders) / X(owner) state plus the FIFO queue of waiters."""

    __slots__ = (
        "_below",
        "_clock",
        "_exclusive",
        "_file_locks",
        "_file_total",
        "_file_x",
        "_file_x_total",
        "_held",
        "_queue",
        "_queued",
        "_reserved",
        "_shared",
        "_since",
    )

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._exclusive: dict[str, str] = {}
        self._shared: dict[str, set[str]] = {}
        self._since: dict[str, float] = {}
        self._held: dict[str, dict[str, bool]] = {}
        """owner -> resource -> exclusive."""
        self._below: dict[str, list[int]] = {}
        """directory key -> [file locks, file X locks] held under it, by any owner. Entries stay
        at zero once made (a directory locked once is likely locked again; there are at most as
        many as the workspace has directories), which keeps a grant and release allocation-free."""
        self._file_locks: dict[str, int] = {}
        """owner -> file locks it holds, so workspace checks never scan the file keys."""
        self._file_x: dict[str, int] = {}
        self._file_total = 0
        self._file_x_total = 0
        self._queue: dict[Waiter, None] = {}
        """Waiters in FIFO order (a dict: ordered, O(1) removal on cancellation)."""
        self._queued: dict[str, set[str]] = {}
        """owner -> resources it waits for."""
        self._reserved = _Reservations()

    # -- queries ---------------------------------------------------------------------------

    def can_grant(self, owner: str, lockset: Lockset) -> bool:
        """Whether `acquire` would grant `lockset` to `owner` right now (raises on misuse)."""
        entries = lockset.entries
        self._check_request(owner, entries)
        return not self._blocked(owner, entries, self._reserved if self._queue else None)

    def holders_of(self, owner: str) -> dict[str, Mode]:
        """The resources `owner` holds, with their modes."""
        return {r: "X" if x else "S" for r, x in self._held.get(owner, {}).items()}

    def waiters(self) -> tuple[Waiter, ...]:
        """Queued requests, first come first."""
        return tuple(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing held and nobody waiting."""
        return not self._held and not self._queue

    def snapshot(self) -> list[LockInfo]:
        """Every held or awaited resource, sorted by key."""
        waits: dict[str, list[LockWait]] = {}
        for waiter in self._queue:
            for resource, mode in waiter.lockset:
                waits.setdefault(resource, []).append(LockWait(waiter.owner, mode, waiter.since))
        return [self._info(r, tuple(waits.get(r, ()))) for r in sorted(self._since.keys() | waits)]

    def _info(self, resource: str, waits: tuple[LockWait, ...]) -> LockInfo:
        since = self._since.get(resource)
        if (owner := self._exclusive.get(resource)) is not None:
            return LockInfo(resource, "X", (owner,), waits, since)
        if readers := self._shared.get(resource):
            return LockInfo(resource, "S", tuple(sorted(readers)), waits, since)
        return LockInfo(resource, "FREE", (), waits, since)

    # -- commands --------------------------------------------------------------------------

    def acquire(self, owner: str, lockset: Lockset) -> Waiter | None:
        """Grant the whole lockset now (returns None) or queue it (returns its Waiter)."""
        entries = lockset.entries
        self._check_request(owner, entries)
        if self._blocked(owner, entries, self._reserved if self._queue else None):
            return self._enqueue(owner, lockset)
        self._grant(owner, entries)
        return None

    def release(self, owner: str, lockset: Lockset) -> tuple[Waiter, ...]:
        """Release the whole lockset; returns the waiters this granted, in FIFO order."""
        held = self._held.get(owner, {})
        entries = lockset.entries
        for resource, exclusive, _, _ in entries:
            if held.get(resource) is not exclusive:
                mode = "X" if exclusive else "S"
                raise LockUsageError(
                    f"{owner} does not hold {resource}:{mode}: release the lockset it acquired"
                )
        for entry in entries:
            self._drop(owner, held, entry)
        if not held and entries:
            del self._held[owner]
        return self._wake() if self._queue else _NOBODY

    def withdraw(self, waiter: Waiter) -> tuple[Waiter, ...]:
        """Remove a waiter (its task was cancelled); returns the waiters this granted."""
        if waiter not in self._queue:
            raise LockUsageError(f"{waiter!r} is not waiting: it was granted or withdrawn")
        self._dequeue(waiter)
        return self._wake() if self._queue else _NOBODY

    def release_all(self, owner: str) -> Revocation:
        """Drop every lock and queued request of `owner` (a cancelled core job)."""
        withdrawn = tuple(w for w in self._queue if w.owner == owner)
        for waiter in withdrawn:
            self._dequeue(waiter)
        held = self._held.pop(owner, {})
        for resource, exclusive in list(held.items()):
            self._drop(owner, held, entry_of(resource, exclusive))
        return Revocation(withdrawn, self._wake() if self._queue else _NOBODY)

    # -- rules -----------------------------------------------------------------------------

    def _check_request(self, owner: str, entries: tuple[LockEntry, ...]) -> None:
        if owner != EDGE:
            check_owner(owner)
        held = self._held.get(owner)
        queued = self._queued.get(owner)
        for resource, exclusive, _, _ in entries:
            if held and resource in held:
                if exclusive and not held[resource]:
                    raise LockUsageError(
                        f"{owner} holds {resource}:S and asks for X: S-to-X upgrades are not "
                        "allowed, release S first"
                    )
                raise LockUsageError(f"{owner} already holds {resource}: acquire it once")
            if queued and resource in queued:
                raise LockUsageError(f"{owner} already waits for {resource}: acquire it once")

    def _blocked(
        self, owner: str, entries: tuple[LockEntry, ...], reserved: _Reservations | None
    ) -> bool:
        """Whether another owner's held lock, or a reservation, stops this lockset."""
        exclusive = self._exclusive
        shared = self._shared
        workspace_owner = exclusive.get(WORKSPACE)
        for resource, wants_x, kind, ancestors in entries:
            if resource in exclusive or (wants_x and resource in shared):
                return True
            if kind == KIND_FILE:
                if workspace_owner not in (None, owner) and (wants_x or owner != EDGE):
                    return True
                if wants_x and (readers := shared.get(WORKSPACE)) and readers != {owner}:
                    return True
                if self._file_total and self._family_blocks(owner, resource, wants_x, ancestors):
                    return True
            elif kind == KIND_WORKSPACE:
                if wants_x:
                    others = self._file_total - self._file_locks.get(owner, 0)
                else:
                    others = self._file_x_total - self._file_x.get(owner, 0)
                if others:
                    return True
        if reserved is None:
            return False
        return reserved.block(owner, entries, workspace_owner not in (None, owner))

    def _family_blocks(
        self, owner: str, resource: str, wants_x: bool, ancestors: tuple[str, ...]
    ) -> bool:
        """Whether another owner holds a conflicting lock on a directory above `resource` or on
        anything under it (§9.2 hierarchy)."""
        exclusive, shared = self._exclusive, self._shared
        for ancestor in ancestors:
            holder = exclusive.get(ancestor)
            if holder is not None and holder != owner:
                return True
            if wants_x and (readers := shared.get(ancestor)) and readers != {owner}:
                return True
        counts = self._below.get(resource)
        under = 0 if counts is None else counts[0] if wants_x else counts[1]
        return under > 0 and under > self._own_below(owner, resource, wants_x)

    def _own_below(self, owner: str, resource: str, wants_x: bool) -> int:
        """How many of the locks under directory `resource` are `owner`'s (X ones only unless
        `wants_x`); a scan of the owner's own few locks, done only when something is under."""
        top = "file:" if resource == ROOT_KEY else resource + "/"
        return sum(
            1
            for held, exclusive in self._held.get(owner, {}).items()
            if held.startswith(top) and held != resource and (wants_x or exclusive)
        )

    def _wake(self) -> tuple[Waiter, ...]:
        """Grant, in FIFO order, every waiter that holders and earlier reservations allow."""
        granted: list[Waiter] = []
        earlier = _Reservations()
        for waiter in list(self._queue):
            entries = waiter.lockset.entries
            if self._blocked(waiter.owner, entries, earlier):
                earlier.add(entries)
            else:
                self._dequeue(waiter)
                self._grant(waiter.owner, entries)
                granted.append(waiter)
        return tuple(granted)

    # -- bookkeeping -----------------------------------------------------------------------

    def _grant(self, owner: str, entries: tuple[LockEntry, ...]) -> None:
        if not entries:
            return
        held = self._held.get(owner)
        if held is None:
            held = self._held[owner] = {}
        now = self._clock()
        for resource, exclusive, kind, ancestors in entries:
            if exclusive:
                self._exclusive[resource] = owner
                self._since[resource] = now
            elif (readers := self._shared.get(resource)) is not None:
                readers.add(owner)
            else:
                self._shared[resource] = {owner}
                self._since[resource] = now
            held[resource] = exclusive
            if kind == KIND_FILE:
                self._file_locks[owner] = self._file_locks.get(owner, 0) + 1
                self._file_total += 1
                if exclusive:
                    self._file_x[owner] = self._file_x.get(owner, 0) + 1
                    self._file_x_total += 1
                below = self._below
                for ancestor in ancestors:
                    counts = below.get(ancestor)
                    if counts is None:
                        counts = below[ancestor] = [0, 0]
                    counts[0] += 1
                    counts[1] += exclusive

    def _drop(self, owner: str, held: dict[str, bool], entry: LockEntry) -> None:
        resource, exclusive, kind, ancestors = entry
        del held[resource]
        if exclusive:
            del self._exclusive[resource]
            del self._since[resource]
        else:
            readers = self._shared[resource]
            readers.discard(owner)
            if not readers:
                del self._shared[resource]
                del self._since[resource]
        if kind == KIND_FILE:
            _decrement(self._file_locks, owner)
            self._file_total -= 1
            if exclusive:
                _decrement(self._file_x, owner)
                self._file_x_total -= 1
            for ancestor in ancestors:
                counts = self._below[ancestor]
                counts[0] -= 1
                counts[1] -= exclusive

    def _enqueue(self, owner: str, lockset: Lockset) -> Waiter:
        waiter = Waiter(owner, lockset, self._clock())
        self._queue[waiter] = None
        self._queued.setdefault(owner, set()).update(r for r, _ in lockset)
        self._reserved.add(lockset.entries)
        return waiter

    def _dequeue(self, waiter: Waiter) -> None:
        del self._queue[waiter]
        queued = self._queued[waiter.owner]
        queued.difference_update(r for r, _ in waiter.lockset)
        if not queued:
            del self._queued[waiter.owner]
        self._reserved.remove(waiter.lockset.entries)


def _increment(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _decrement(counts: dict[str, int], owner: str) -> None:
    if counts[owner] == 1:
        del counts[owner]
    else:
        counts[owner] -= 1
