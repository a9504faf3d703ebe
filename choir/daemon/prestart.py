"""What `choird` starts before it imports the rest of itself: the instance lock, then the
embedded Postgres.

The server takes 0.1-0.3 s to start, in processes of its own; choird's imports (~0.4 s of CPU)
and its config check run meanwhile instead of before it (`ChoirDaemon` then waits for the
server where it used to start it). Which server to start is read from config.json without
checking the rest: a home whose config names an external server (`postgres.host`, or
`embedded: false`) starts nothing early, and a config that fails its check stops the server
again before choird exits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from choir.daemon.instance_lock import InstanceLock
from choir.home import ChoirHome
from choir.store.postgres.embedded import EmbeddedPostgres


@dataclass
class EarlyStart:
    """The lock choird holds on its home, and the embedded server starting on a thread."""

    lock: InstanceLock
    postgres: EmbeddedPostgres | None

    def close(self) -> None:
        """Stop the server (a no-op once the daemon stopped it) and let the home go; blocking."""
        try:
            if self.postgres is not None:
                self.postgres.stop()
        finally:
            self.lock.release()


def start_early(home: ChoirHome, config: dict[str, Any]) -> EarlyStart:
    """Lock `home` (ConflictError when another choird holds it), then begin the embedded
    server's start when `config` (config.json, unchecked) asks for one."""
    lock = InstanceLock(home.root)
    lock.acquire()
    postgres = None
    if wants_embedded(config):
        postgres = EmbeddedPostgres(home.pgdata)
        postgres.start_soon()
    return EarlyStart(lock, postgres)


def wants_embedded(config: dict[str, Any]) -> bool:
    """Whether config.json asks for the embedded server, by the rule its check applies (no
    `postgres` or no `host` in it means embedded) — and only when `embedded` says nothing else."""
    postgres = config.get("postgres")
    if postgres is None:
        return True
    if not isinstance(postgres, dict):
        return False
    embedded = postgres.get("embedded")
    return embedded is True or (embedded is None and "host" not in postgres)
