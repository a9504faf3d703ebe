"""A full or failing disk under `$CHOIR_HOME` or an agent's workspace, noticed and reported as
what it is (issue 12.6).

Two kinds of evidence: faults reported where they happen (a database write refused for lack of
space, a log line that could not be written, an agent socket that could not be created), and a
look at each watched file system every few seconds — `$CHOIR_HOME`, its logs and database, and
every configured workspace: is it mounted read-only, has it room? — and a one-byte write in
choird's own directories (`$CHOIR_HOME`, its logs), since a file system the kernel stopped after
an I/O error can still look writable (ext4's `emergency_ro`). Either makes the disk a `disk`
problem in choird's health — `full` or `io_error`, naming the path and the fix — shown by
`status`, the console's header and the log. A reported fault counts until its source writes
again, or else until it is `HOLD_S` old and, for a full disk, its file system has room again;
a file system still read-only keeps its fault. So a disk that was freed or remounted writable
clears within a few seconds without the operator doing anything more.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from choir.daemon.health.board import DaemonHealth
from choir.store.postgres.failures import disk_failure

FULL_BELOW_BYTES: Final = 1 << 20
"""A file system with less room than this for an unprivileged writer is full for choird."""
HOLD_S: Final = 5.0
"""How long a reported fault counts after it was last seen."""
CHECK_EVERY_S: Final = 2.0

DiskState = Literal["full", "io_error"]


@dataclass(frozen=True, slots=True)
class _Fault:
    state: DiskState
    where: Path
    reason: str
    seen: float
    """When it was last reported (monotonic)."""
    since: float
    """When it was first reported: the oldest fault is the one shown, so the report stays put
    while a full disk makes one writer after another fail."""


class DiskWatch:
    """Faults per source plus free space per watched path, folded into one `disk` problem."""

    def __init__(
        self,
        health: DaemonHealth,
        paths: Callable[[], Iterable[Path]],
        *,
        probed: Iterable[Path] = (),
        full_below: int = FULL_BELOW_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._health = health
        self._paths = paths
        """The paths to look at, asked at every check (workspaces follow config.json)."""
        self._probed = list(probed)
        """Directories of choird's own where every check writes (and removes) a byte."""
        self._full_below = full_below
        self._clock = clock
        self._faults: dict[str, _Fault] = {}

    def note(self, source: str, where: Path, error: BaseException | None) -> None:
        """`source` (postgres, log, socket…) failed to write at `where` because of `error`;
        None: it writes again, so its fault is over."""
        if error is None:
            if self._faults.pop(source, None) is not None:
                self._publish()
            return
        kind = disk_failure(error)
        if kind is None:
            return
        state: DiskState = "full" if kind == "disk_full" else "io_error"
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        reason = f"{source} could not write to {where}: {_what(error, state)} ({detail}); "
        reason += _fix(error, state)
        now = self._clock()
        old = self._faults.get(source)
        since = old.since if old is not None and old.state == state else now
        self._faults[source] = _Fault(state, where, reason, now, since)
        self._publish()

    def check(self) -> None:
        """Look at every watched path (read-only? room left?) and expire old faults; publish."""
        now = self._clock()
        watched = set()
        for path in self._paths():
            key = f"space:{path}"
            watched.add(key)
            found = self._look_at(path)
            if found is None:
                self._faults.pop(key, None)
                continue
            state, reason = found
            old = self._faults.get(key)
            since = old.since if old is not None and old.state == state else now
            self._faults[key] = _Fault(state, path, reason, now, since)
        for directory in self._probed:
            self.note(f"writing in {directory}", directory, write_probe(directory))
        for key, fault in list(self._faults.items()):
            if key.startswith("space:"):
                if key not in watched:  # no longer watched (a workspace removed from config)
                    del self._faults[key]
                continue
            if now - fault.seen < HOLD_S or read_only(fault.where):
                continue
            free = free_bytes(fault.where)
            if fault.state == "io_error" or free is None or free >= self._full_below:
                del self._faults[key]
        self._publish()

    def _look_at(self, path: Path) -> tuple[DiskState, str] | None:
        """What is wrong with `path`'s file system, if anything."""
        if read_only(path):
            return "io_error", (
                f"{path} is on a read-only file system; remount it read-write (if the kernel "
                "made it read-only after disk errors, check `dmesg` and repair it first)"
            )
        free = free_bytes(path)
        if free is not None and free < self._full_below:
            return "full", (
                f"{path} is on a full file system (less than {self._full_below} bytes left); "
                "free space there"
            )
        return None

    def _publish(self) -> None:
        if not self._faults:
            self._health.clear("disk")
            return
        first = min(self._faults.values(), key=lambda fault: fault.since)
        self._health.report("disk", first.state, first.reason, where=str(first.where))


def _what(error: BaseException, state: DiskState) -> str:
    if state == "full":
        return "no space left"
    if isinstance(error, OSError) and error.errno == errno.EROFS:
        return "its file system is read-only"
    return "an I/O error"


def _fix(error: BaseException, state: DiskState) -> str:
    if state == "full":
        return "free space on its file system"
    if isinstance(error, OSError) and error.errno == errno.EROFS:
        return (
            "the kernel makes a file system read-only after disk errors: check `dmesg`, repair "
            "it (fsck) and remount it read-write"
        )
    return "check the disk (`dmesg`, SMART)"


PROBE_NAME: Final = ".choird-write-probe"


def write_probe(directory: Path) -> OSError | None:
    """Write a byte to a file in `directory` and remove it: the error, or None if it worked."""
    probe = directory / PROBE_NAME
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\n")  # no fsync every few seconds: the page cache answers this
        finally:
            os.close(fd)
        os.unlink(probe)
    except FileNotFoundError:
        return None  # not there (yet): nothing to say about its disk
    except OSError as error:
        return error
    return None


def read_only(path: Path) -> bool:
    """Whether `path`'s file system is mounted read-only (False when there is no such path)."""
    for candidate in (path, *path.parents):
        try:
            return bool(os.statvfs(candidate).f_flag & os.ST_RDONLY)
        except OSError:
            continue
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on `path`'s file system (None: no such path)."""
    for candidate in (path, *path.parents):
        try:
            stats = os.statvfs(candidate)
        except OSError:
            continue
        return stats.f_bavail * stats.f_frsize
    return None
