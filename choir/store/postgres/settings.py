"""Server settings of the embedded PostgreSQL: sized for one operator's host, not a shared server.

PostgreSQL's defaults assume a machine of its own (128 MB of shared buffers, background workers
for logical replication). choir's embedded server holds one home's sessions: its working set is
a few MB, and every process that touches the shared buffers counts them in its resident memory.
The settings live in `choir.conf` in the data directory, included from `postgresql.conf`, and are
written before every start (and right after `initdb`, before a new cluster's first start), so a
changed value here reaches existing homes at their next start.

Shared buffers grow with the data (`shared_buffers_for`): a home whose memory holds 100k chunks
has a 124 MB HNSW index that every vector search walks at random, and through 16 MB of buffers
each search copied ~750 pages back from the OS page cache (4.3 ms of CPU instead of 2.3 ms).
Sized at start from the databases' files, a small home keeps 16 MB: each process's resident
memory grows with the buffers' bookkeeping it touches (~5 MB for the postmaster, ~1.7 MB per
backend at 256 MB), not only with the pages it reads.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

SETTINGS: Final[dict[str, str]] = {
    # the hot set of a small home fits many times over; the OS page cache does the rest. The
    # floor: `shared_buffers_for` raises it for a home with more data
    "shared_buffers": "16MB",
    # choir never replicates logically: no launcher process, no slots for its workers
    "max_logical_replication_workers": "0",
    "max_worker_processes": "4",
    "max_parallel_workers": "2",
    # shared memory is sized per connection slot (locks, snapshots, the process array) and the
    # postmaster touches all of it at start: 30 slots hold three pools at their 10 (2.5 MB less
    # resident than the default 100)
    "max_connections": "30",
    # nothing streams choir's WAL: no slots kept for senders
    "max_wal_senders": "0",
    # pinned to what 16MB of shared buffers gives (1/32): left to scale with them, the WAL
    # buffers the walwriter and every writing backend touch grow too (+1.5 MB resident each
    # at 64MB of buffers)
    "wal_buffers": "512kB",
    # a new 16 MB WAL segment is created by the commit that fills the last one: zero-filling
    # it first put bench.heartbeat's p99 at 13 ms (goal 10), 10 without (measured side by
    # side). ext4 allocates as WAL is written; out of space, the server stops either way
    "wal_init_zero": "off",
}
MIN_BUFFERS_MB: Final = 16
MAX_BUFFERS_MB: Final = 256
"""Enough for the HNSW index of 200k memory chunks; one operator's host, not a server's."""
CONF_NAME: Final = "choir.conf"
INCLUDE: Final = f"include_if_exists = '{CONF_NAME}'"


def shared_buffers_for(datadir: Path) -> str:
    """`MIN_BUFFERS_MB`, doubled while under half the size of the largest database in `datadir`
    (its working set: the indexes searches walk), at most `MAX_BUFFERS_MB`."""
    largest = max((_size(db) for db in _entries(datadir / "base")), default=0)
    megabytes = MIN_BUFFERS_MB
    while megabytes < MAX_BUFFERS_MB and megabytes * 2**21 < largest:
        megabytes *= 2
    return f"{megabytes}MB"


def settings_for(datadir: Path) -> dict[str, str]:
    """`SETTINGS`, with shared buffers sized for the data in `datadir`."""
    return SETTINGS | {"shared_buffers": shared_buffers_for(datadir)}


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:  # no cluster yet, or a database dropped meanwhile
        return []


def _size(database: os.DirEntry[str]) -> int:
    if not database.is_dir(follow_symlinks=False):
        return 0
    total = 0
    for entry in _entries(Path(database.path)):
        with contextlib.suppress(OSError):  # a relation file removed while it is read
            total += entry.stat(follow_symlinks=False).st_size
    return total


def render(settings: dict[str, str] = SETTINGS) -> str:
    lines = [f"{name} = '{value}'" for name, value in settings.items()]
    return (
        "# written by choird at every start: edits are lost (choir/store/postgres/settings.py)\n"
        + ("\n".join(lines) + "\n")
    )


def apply(datadir: Path) -> bool:
    """Write `choir.conf` and include it from `postgresql.conf`, owned like it; False when the
    cluster does not exist yet (nothing to configure)."""
    main = datadir / "postgresql.conf"
    try:
        owner = main.stat()
        text = main.read_text()
    except FileNotFoundError:
        return False
    conf = datadir / CONF_NAME
    # private like the rest of the data directory, whatever the umask
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(render(settings_for(datadir)))
    os.chmod(conf, 0o600)  # a file written by an earlier version keeps its mode otherwise
    if INCLUDE not in text:
        with main.open("a") as file:
            file.write(f"\n{INCLUDE}\n")
    if os.geteuid() == 0:  # the server runs as its own user and must read what root wrote
        os.chown(conf, owner.st_uid, owner.st_gid)
    return True
