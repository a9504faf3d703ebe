"""Keeping choird's embedded Postgres up (issue 12 point 4): notice its death, restart it.

Twice a second the supervisor asks whether the postmaster it started still runs (a look at
`/proc`, no query). When it is gone — killed, out of memory, a PANIC it could not survive —
the problem is reported at once (`status`, the operator feed, the log) and the server is
started again on the same data directory, with exponential backoff between failed attempts
(0.5 s doubling to 30 s), until it serves again. Meanwhile every command that needs the
database is answered `unavailable` (exit 6) and every heartbeat is refused, never acknowledged,
so agents keep their events buffered and resend them once the server is back. The pool keeps
its configuration; its dead connections are replaced on their next use.
"""

from __future__ import annotations

import asyncio
from typing import Final

from choir.daemon.health.board import DaemonHealth
from choir.errors import UnavailableError
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.store.postgres.embedded import EmbeddedPostgres
from choir.store.postgres.pool import Pool, wait_until_ready

log = get_logger("choird.postgres")

CHECK_EVERY_S: Final = 0.5
RESTART_BASE_S: Final = 0.5
RESTART_CAP_S: Final = 30.0


def restart_delay(attempt: int) -> float:
    """Seconds to wait after failed restart attempt number `attempt` (0-based)."""
    return float(min(RESTART_CAP_S, RESTART_BASE_S * 2 ** min(attempt, 16)))


class PostgresSupervisor:
    """Watches one embedded server and restarts it when its postmaster is gone."""

    def __init__(
        self,
        server: EmbeddedPostgres,
        pool: Pool,
        health: DaemonHealth,
        *,
        check_every_s: float = CHECK_EVERY_S,
    ) -> None:
        self._server = server
        self._pool = pool
        self._health = health
        self._check_every_s = check_every_s
        self.restarts = 0
        """Successful restarts since choird started."""

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            await asyncio.sleep(self._check_every_s)
            if not self._server.alive():
                await self._restart()

    async def _restart(self) -> None:
        gone = self._server.pid
        self._health.report(
            "postgres",
            "down",
            f"the embedded server (postmaster pid {gone}) stopped; choird is restarting it",
            where=str(self._server.datadir),
            restarts=0,
        )
        attempt = 0
        while not await self._attempt(attempt):
            delay = restart_delay(attempt)
            attempt += 1
            await asyncio.sleep(delay)
        self.restarts += 1
        await self._pool.expire_connections()
        log.info(
            "embedded Postgres restarted",
            fields={"was_pid": gone, "pid": self._server.pid, "attempts": attempt + 1},
        )
        self._health.clear("postgres")

    async def _attempt(self, attempt: int) -> bool:
        """One start; False (the failure reported) when the server is not serving yet."""
        self._health.report(
            "postgres",
            "restarting",
            f"the embedded server stopped; restarting it (attempt {attempt + 1})",
            where=str(self._server.datadir),
            restarts=attempt + 1,
        )
        try:
            await failpoint("postgres.before_restart")
            await asyncio.to_thread(self._server.start)
            await wait_until_ready(self._server.params)
        except UnavailableError as error:
            self._health.report(
                "postgres",
                "down",
                f"restarting the embedded server failed: {error.message}; next attempt in "
                f"{restart_delay(attempt):g} s",
                where=str(self._server.datadir),
                restarts=attempt + 1,
            )
            return False
        return True
