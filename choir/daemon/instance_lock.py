"""One choird per `$CHOIR_HOME`: an exclusive `flock` held for the daemon's whole life.

The operator-socket probe alone races: two choirds started at the same instant both find no
server answering and both go on to adopt the embedded Postgres. The kernel releases a `flock`
when its holder exits however it exits, so a crashed choird never leaves a stale lock behind.

The lock belongs to the open file, not to the descriptor: a child forked by any of choird's
threads (a `git` of the repo fetch, a probe) shares that file until its exec closes it. Closing
the descriptor alone therefore left the lock held for that instant, and a choird started right
after a stop was refused as "already running". `release` unlocks the file first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from choir.errors import ConflictError

LOCK_NAME = "choird.lock"


class InstanceLock:
    """Held from `acquire` until `release` (or the process ends)."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ConflictError naming the running choird's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ConflictError(
                f"choird is already running on {self.path.parent} (pid {holder}); "
                "stop it first (choir down) or use another CHOIR_HOME"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)  # also for a child that shares the file
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
