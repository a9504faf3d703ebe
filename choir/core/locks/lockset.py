"""Lock keys, owners and locksets (§9.2, §9.3, §7.3): what a tool call asks the lock manager for.

A lockset is canonical — one entry per resource, sorted by resource, X winning when the same
resource is named with both modes — so equal locksets compare equal and every check walks the
locks in one fixed order. Keys are validated here, once per lockset, so the lock table's hot path
never parses a string: each entry carries its resource, whether it is exclusive, its kind
(workspace, file, or an independent resource) and, for a file key, the keys of the directories
above it (the §9.2 hierarchy: a lock on a directory covers everything under it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Final, Literal, NamedTuple, final

from choir.errors import ChoirError, UsageError

Mode = Literal["S", "X"]
"""S: shared (readers, many holders). X: exclusive (one holder)."""

EDGE: Final = "edge"
"""The owner name of the edge lane; core jobs own locks as `core:<job-name>`."""
CORE_PREFIX: Final = "core:"
WORKSPACE: Final = "workspace"
"""The coarse lock that dominates every `file:<path>` lock (§9.2)."""

KIND_WORKSPACE: Final = 0
KIND_FILE: Final = 1
KIND_INDEPENDENT: Final = 2
"""browser_tab, choirtmp, mem:, repo:, net:, ext: — outside the workspace hierarchy."""

_BARE_KEYS: Final = frozenset({WORKSPACE, "browser_tab", "choirtmp"})
_PARAMETERIZED: Final = ("file", "mem", "repo", "net", "ext")
_KEY_HELP: Final = (
    "use workspace, browser_tab, choirtmp, file:<path>, mem:<ws>, repo:<ws>, net:<svc> or ext:<p>"
)

ROOT_KEY: Final = "file:."
"""The workspace root as a file key: the directory above every other file key."""

LockEntry = tuple[str, bool, int, tuple[str, ...]]
"""(resource, exclusive, kind, ancestors): a lock as the table checks it. `ancestors` are the file
keys of the directories above a file key, root first (`file:.`, `file:src` for `file:src/a.py`);
empty for every other key."""


class LockKeyError(UsageError):
    """A resource key, mode or owner that §9.2/§7.3 does not allow."""


class LockUsageError(ChoirError):
    """A lock call that breaks the manager's contract: upgrade, re-acquire, or release unheld."""


class LockRequest(NamedTuple):
    """One lock of a lockset: a resource key and a mode."""

    resource: str
    mode: Mode

    @classmethod
    def parse(cls, spec: str) -> LockRequest:
        """Parse the `<resource>:<mode>` form of §8.7, e.g. `file:src/a.py:S` or `workspace:X`."""
        resource, sep, mode = spec.rpartition(":")
        if not sep or mode not in ("S", "X"):
            raise LockKeyError(f"lock {spec!r} has no mode: write it as <resource>:S or :X")
        return cls(resource, "X" if mode == "X" else "S")


def key_kind(resource: str) -> int:
    """Validate a resource key and return its kind; raises LockKeyError naming the fix."""
    if resource in _BARE_KEYS:
        return KIND_WORKSPACE if resource == WORKSPACE else KIND_INDEPENDENT
    namespace, sep, rest = resource.partition(":")
    if not sep or namespace not in _PARAMETERIZED:
        raise LockKeyError(f"unknown lock resource {resource!r}: {_KEY_HELP}")
    if not rest:
        raise LockKeyError(f"lock resource {resource!r} names nothing after {namespace}:")
    if namespace == "file":
        _check_file_path(rest)
        return KIND_FILE
    return KIND_INDEPENDENT


@functools.lru_cache(maxsize=4096)
def entry_of(resource: str, exclusive: bool) -> LockEntry:
    """The table's form of one lock (validates the key like `key_kind`); cached, since the same
    few keys come back on every call of a session."""
    kind = key_kind(resource)
    return (resource, exclusive, kind, ancestors_of(resource) if kind == KIND_FILE else ())


def ancestors_of(resource: str) -> tuple[str, ...]:
    """The file keys of the directories above file key `resource`, root first."""
    path = resource[len("file:") :]
    if path == ".":
        return ()
    parts = path.split("/")
    return (ROOT_KEY, *("file:" + "/".join(parts[:end]) for end in range(1, len(parts))))


def _check_file_path(path: str) -> None:
    """File keys hold normalized workspace-relative paths (`.` is the root, e.g. a search of the
    whole tree); anything else is a caller bug."""
    if path == ".":
        return
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise LockKeyError(
            f"lock path {path!r} is not normalized: pass it relative to the workspace, "
            "without '.', '..', or empty parts"
        )
    if parts[0] == ".choirtmp":
        raise LockKeyError(
            f"lock path {path!r} is under .choirtmp/, which is outside the workspace hierarchy: "
            "lock choirtmp instead"
        )


def check_owner(owner: str) -> str:
    """Owners are lanes (§7.3): `edge` or `core:<job-name>`."""
    if owner == EDGE or (owner.startswith(CORE_PREFIX) and len(owner) > len(CORE_PREFIX)):
        return owner
    raise LockKeyError(f"lock owner {owner!r} is not a lane: use 'edge' or 'core:<job-name>'")


@final
class Lockset:
    """A canonical, immutable set of locks acquired and released as one unit (§9.3)."""

    __slots__ = ("entries", "requests")

    requests: tuple[LockRequest, ...]
    """The locks, sorted by resource, one per resource."""
    entries: tuple[LockEntry, ...]
    """The same locks as the table checks them, in the same order."""

    def __init__(self, requests: Iterable[LockRequest | str] = ()) -> None:
        modes: dict[str, Mode] = {}
        for request in requests:
            resource, mode = LockRequest.parse(request) if isinstance(request, str) else request
            if mode not in ("S", "X"):
                raise LockKeyError(f"lock mode {mode!r} of {resource!r} is not S or X")
            if modes.get(resource) != "X":
                modes[resource] = mode
        self.requests = tuple(LockRequest(r, modes[r]) for r in sorted(modes))
        self.entries = tuple(entry_of(r, m == "X") for r, m in self.requests)

    @classmethod
    def of(cls, *requests: LockRequest | str) -> Lockset:
        """`Lockset.of("file:a.py:S", "choirtmp:X")`."""
        return cls(requests)

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(r for r, _ in self.requests)

    def __iter__(self) -> Iterator[LockRequest]:
        return iter(self.requests)

    def __len__(self) -> int:
        return len(self.requests)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lockset) and other.requests == self.requests

    def __hash__(self) -> int:
        return hash(self.requests)

    def __repr__(self) -> str:
        return f"Lockset.of({', '.join(repr(f'{r}:{m}') for r, m in self.requests)})"
