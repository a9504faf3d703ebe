"""Server settings of the embedded PostgreSQL: sized for one operator's host, not a shared server.

PostgreSQL's defaults assume a machine of its own (128 MB of shared buffers, background workers
for logical replication). choir's embedded server holds one home's sessions: its working set is
a few MB, and every process that touches the shared buffers counts them in its resident memory.
The settings live in `choir.conf` in the data directory, included from `postgresql.conf`, and are
written before every start, so a changed value here reaches existing homes at their next start
(a cluster that `initdb` creates during a start gets them from the following one).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

SETTINGS: Final[dict[str, str]] = {
    # the hot set of a home's sessions fits many times over; the OS page cache does the rest
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
}
CONF_NAME: Final = "choir.conf"
INCLUDE: Final = f"include_if_exists = '{CONF_NAME}'"


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
        file.write(render())
    os.chmod(conf, 0o600)  # a file written by an earlier version keeps its mode otherwise
    if INCLUDE not in text:
        with main.open("a") as file:
            file.write(f"\n{INCLUDE}\n")
    if os.geteuid() == 0:  # the server runs as its own user and must read what root wrote
        os.chown(conf, owner.st_uid, owner.st_gid)
    return True
