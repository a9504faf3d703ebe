"""What choird learns from how its queries end (the pool's observer, `open_database(observe=)`).

A write refused for lack of space or by an I/O error is a disk problem (`DiskWatch`), reported
where it happened instead of surfacing later as a "crashed" agent whose heartbeats could not be
stored. A query that fails because the server went away makes Postgres `down` until a query
succeeds again — for an external server, which choird cannot restart, this is how the operator
hears of it; the embedded one is also watched by its supervisor.
"""

from __future__ import annotations

from pathlib import Path

from choir.daemon.health.board import DaemonHealth
from choir.daemon.health.disk import DiskWatch
from choir.store.postgres.failures import classify


class StoreWatch:
    """The pool's query observer."""

    def __init__(self, health: DaemonHealth, disk: DiskWatch, where: Path | str) -> None:
        self._health = health
        self._disk = disk
        self._where = where
        """The data directory (embedded) or the server's address (external), for messages."""
        self._down = False

    def __call__(self, error: BaseException | None) -> None:
        if error is None:
            if self._down:
                self._down = False
                if self._health.problem("postgres") is not None:
                    self._health.clear("postgres")
            return
        kind = classify(error)
        if kind in ("disk_full", "io_error"):
            self._disk.note("postgres", Path(self._where), error)
        elif kind == "down" and self._health.problem("postgres") is None:
            self._down = True
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            self._health.report(
                "postgres", "down", f"a query failed: {detail}", where=str(self._where)
            )
