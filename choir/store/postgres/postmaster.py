"""The embedded server's postmaster: who it is, whether it lives, how it is stopped.

PostgreSQL refuses to start while `postmaster.pid` names a live process, and `pgserver` reuses
whatever that file points at. After a crash or reboot the pid may be dead, a zombie, or reused by
an unrelated process; then the file is stale and must go. A live `postgres` serving our data
directory — named on its command line, or (started in a private mount namespace, where the
directory has another path) its working directory — is the only thing that counts as
"running"; anything else is removed. Stopping is PostgreSQL's own protocol by signal (SIGINT:
fast shutdown), which needs no path the server's user could be denied.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil

from choir.store.postgres.embedded_root import ns_data

PIDFILE: Final = "postmaster.pid"
PORT_LINE: Final = 3
SOCKET_DIR_LINE: Final = 4
STATUS_LINE: Final = 7
"""0-based lines of postmaster.pid (see PostgreSQL's pidfile.h)."""
STATUS_READY: Final = "ready"
"""The status line once the server accepts connections (what `pg_ctl -w` waits for)."""
FAST_STOP_S: Final = 30.0
"""How long a fast shutdown may take (it checkpoints) before an immediate one."""

_log = logging.getLogger(__name__)


def postmaster_pid(datadir: Path) -> int | None:
    """The pid recorded in `datadir/postmaster.pid`, or None when there is no usable file."""
    try:
        first_line = (datadir / PIDFILE).read_text().split("\n", 1)[0].strip()
    except FileNotFoundError:
        return None
    return int(first_line) if first_line.isdigit() else None


def is_postmaster_of(pid: int, datadir: Path) -> bool:
    """Whether `pid` is a live (not zombie) `postgres` serving `datadir`."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if process.name() != "postgres":
            return False
        return str(datadir) in process.cmdline() or _works_in(pid, datadir)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # someone else's process we cannot inspect: never delete its lock file


def _works_in(pid: int, datadir: Path) -> bool:
    """Whether `pid`'s working directory is `datadir` (the same inode, whatever its path)."""
    try:
        cwd, data = os.stat(f"/proc/{pid}/cwd"), os.stat(datadir)
    except FileNotFoundError:
        return False
    except PermissionError:
        raise psutil.AccessDenied(pid) from None
    return (cwd.st_dev, cwd.st_ino) == (data.st_dev, data.st_ino)


@dataclass(frozen=True, slots=True)
class PidFile:
    """What a running postmaster recorded about itself."""

    pid: int
    port: int
    socket_dir: str
    """As the server sees it (inside its mount namespace, if it runs in one)."""
    status: str
    """`ready` once it accepts connections."""


def read_pidfile(datadir: Path) -> PidFile | None:
    """`datadir/postmaster.pid`, or None when it is missing or incomplete."""
    try:
        lines = (datadir / PIDFILE).read_text().split("\n")
    except FileNotFoundError:
        return None
    if len(lines) <= STATUS_LINE or not lines[0].strip().isdigit():
        return None
    port = lines[PORT_LINE].strip()
    return PidFile(
        int(lines[0]),
        int(port) if port.isdigit() else 5432,
        lines[SOCKET_DIR_LINE].strip(),
        lines[STATUS_LINE].strip(),
    )


def live_postmaster(datadir: Path) -> PidFile | None:
    """The pidfile of a live postmaster serving `datadir` (ready, or still starting up)."""
    info = read_pidfile(datadir)
    if info is None or not is_postmaster_of(info.pid, datadir):
        return None
    return info


def is_ready(datadir: Path) -> bool:
    """Whether the pid file says ready and names a live postmaster of `datadir` (a stale file
    is cleared before a start, so a ready one is the new server's)."""
    recorded = read_pidfile(datadir)
    return (
        recorded is not None
        and recorded.status == STATUS_READY
        and is_postmaster_of(recorded.pid, datadir)
    )


def stop_postmaster(datadir: Path, *, fast_s: float = FAST_STOP_S) -> bool:
    """Stop the postmaster serving `datadir` (fast shutdown, then immediate, then SIGKILL);
    False when none was running. Blocking."""
    pid = postmaster_pid(datadir)
    if pid is None or not is_postmaster_of(pid, datadir):
        return False
    for signum, within in ((signal.SIGINT, fast_s), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        if _exited(pid, within):
            return True
        _log.warning("postmaster %s did not stop after %s", pid, signum.name)
    return True


def _exited(pid: int, within: float) -> bool:
    """Whether `pid` exits within `within` s, looked at after 2, 4, 8… ms (at most every 50):
    a small server's fast shutdown takes ~10 ms, and `choir down` or a restart waits for it."""
    deadline, pause = time.monotonic() + within, 0.002
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return False


def clear_stale_pidfile(datadir: Path) -> bool:
    """Remove `postmaster.pid` (and its socket lock) when no live postmaster owns them.

    Returns True when something was removed.
    """
    pidfile = datadir / PIDFILE
    if not pidfile.exists():
        return False
    pid = postmaster_pid(datadir)
    if pid is not None and is_postmaster_of(pid, datadir):
        return False
    _log.warning("removing stale %s (pid %s is not a running postgres)", pidfile, pid)
    for lock in socket_locks(datadir):
        lock.unlink(missing_ok=True)
    pidfile.unlink(missing_ok=True)
    return True


def socket_locks(datadir: Path) -> list[Path]:
    """The Unix socket lock files the pidfile names (they hold the same, possibly stale, pid)."""
    lines = (datadir / PIDFILE).read_text().split("\n")
    if len(lines) <= SOCKET_DIR_LINE or not lines[PORT_LINE].strip().isdigit():
        return []
    socket_dir = lines[SOCKET_DIR_LINE].strip()
    port = lines[PORT_LINE].strip()
    if socket_dir == str(ns_data(datadir)):  # recorded inside the server's mount namespace
        socket_dir = str(datadir)
    return [Path(socket_dir) / f".s.PGSQL.{port}.lock"] if socket_dir else []
