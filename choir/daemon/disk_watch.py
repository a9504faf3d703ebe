"""A full or failing disk under `$CHOIR_HOME`, noticed and reported as what it is (issue 12.6).

Two kinds of evidence: faults reported where they happen (a database write refused for lack of
space, a log line that could not be written, an agent socket that could not be created), and a
look at the free space of each watched file system every few seconds. Either makes the disk a
`disk` problem in choird's health — `full` (naming the path) or `io_error` — shown by `status`,
the console's header and the log. A reported fault counts until it is `HOLD_S` old and, for a
full disk, until its file system has room again; so a disk that was freed clears within a few
seconds without the operator doing anything.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from choir.daemon.health import DaemonHealth
from choir.store.failures import disk_failure

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
        paths: Sequence[Path],
        *,
        full_below: int = FULL_BELOW_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._health = health
        self._paths = list(paths)
        self._full_below = full_below
        self._clock = clock
        self._faults: dict[str, _Fault] = {}

    def note(self, source: str, where: Path, error: BaseException) -> None:
        """`source` (postgres, log, socket…) failed to write at `where` because of `error`."""
        kind = disk_failure(error)
        if kind is None:
            return
        state: DiskState = "full" if kind == "disk_full" else "io_error"
        what = "no space left" if state == "full" else "an I/O error"
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        fix = "free space on its file system" if state == "full" else "check the disk"
        reason = f"{source} could not write to {where}: {what} ({detail}); {fix}"
        now = self._clock()
        old = self._faults.get(source)
        since = old.since if old is not None and old.state == state else now
        self._faults[source] = _Fault(state, where, reason, now, since)
        self._publish()

    def check(self) -> None:
        """Look at the free space of every watched path and expire old faults; publish."""
        now = self._clock()
        for path in self._paths:
            free = free_bytes(path)
            key = f"space:{path}"
            if free is not None and free < self._full_below:
                reason = (
                    f"{path} is on a full file system (less than {self._full_below} bytes "
                    "left); free space there"
                )
                old = self._faults.get(key)
                self._faults[key] = _Fault("full", path, reason, now, old.since if old else now)
            else:
                self._faults.pop(key, None)
        for key, fault in list(self._faults.items()):
            if key.startswith("space:") or now - fault.seen < HOLD_S:
                continue
            free = free_bytes(fault.where)
            if fault.state == "io_error" or free is None or free >= self._full_below:
                del self._faults[key]
        self._publish()

    def _publish(self) -> None:
        if not self._faults:
            self._health.clear("disk")
            return
        first = min(self._faults.values(), key=lambda fault: fault.since)
        self._health.report("disk", first.state, first.reason, where=str(first.where))


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on `path`'s file system (None: no such path)."""
    for candidate in (path, *path.parents):
        try:
            stats = os.statvfs(candidate)
        except OSError:
            continue
        return stats.f_bavail * stats.f_frsize
    return None
