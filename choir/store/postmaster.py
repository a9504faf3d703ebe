"""Recognising a stale `postmaster.pid` left by a killed embedded Postgres.

PostgreSQL refuses to start while `postmaster.pid` names a live process, and `pgserver` reuses
whatever that file points at. After a crash or reboot the pid may be dead, a zombie, or reused by
an unrelated process; then the file is stale and must go. A live `postgres` whose command line
names our data directory is the only thing that counts as "running" — anything else is removed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import psutil

PIDFILE: Final = "postmaster.pid"
PORT_LINE: Final = 3
SOCKET_DIR_LINE: Final = 4
"""0-based lines of postmaster.pid (see PostgreSQL's pidfile.h)."""

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
        return process.name() == "postgres" and str(datadir) in process.cmdline()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # someone else's process we cannot inspect: never delete its lock file


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
    return [Path(socket_dir) / f".s.PGSQL.{port}.lock"] if socket_dir else []
