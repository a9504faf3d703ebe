"""The embedded PostgreSQL + pgvector that runs when `postgres.embedded` is true.

`pgserver` bundles the server binaries and knows how to run them with a Unix socket in the data
directory. This module adds what a daemon needs on top: a stale-lock check before starting,
one-line errors that name the data directory and its log, an explicit stop, and an async context
manager around both. As root, the server is started by `embedded_root` instead, which runs it
as an unprivileged user without widening the mode of any directory (pgserver would).

The server outlives a killed choird (pg_ctl detaches it); the next start simply reuses it. A
graceful exit stops it, so nothing runs while choir is down — unless choird re-executes itself
(`keep_running`), whose new image adopts it like a killed choird's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from choir.errors import UnavailableError
from choir.store.postgres import pg_ctl, settings
from choir.store.postgres.embedded_root import START_TIMEOUT_S, RootServer
from choir.store.postgres.pool import wait_until_ready
from choir.store.postgres.postmaster import (
    clear_stale_pidfile,
    is_postmaster_of,
    is_ready,
    live_postmaster,
    stop_postmaster,
)
from choir.store.postgres.target import ConnectParams

with warnings.catch_warnings():
    # platformdirs warns at pgserver's import time when XDG_RUNTIME_DIR is unset.
    warnings.simplefilter("ignore")
    from pgserver._commands import POSTGRES_BIN_PATH
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import find_suitable_socket_dir

SUPERUSER: Final = "postgres"
ADMIN_DATABASE: Final = "postgres"
SHMEM_RETRY_S: Final = 5.0
"""How long to wait for children of a killed postmaster to release its shared memory."""

_log = logging.getLogger(__name__)


class _UnmanagedServer(PostgresServer):
    """pgserver's server minus its exit hook and instance cache: EmbeddedPostgres owns the
    lifecycle, and a cached instance would hide a server that was stopped or killed since."""

    def _cleanup(self) -> None:
        self._instances.pop(self.pgdata, None)

    def ensure_postgres_running(self) -> None:
        """pgserver's, but a server that is not running yet is started by `pg_ctl.run`, which
        returns once it is ready rather than at pg_ctl's next look; pgserver then adopts it."""
        if live_postmaster(self.pgdata) is None:
            socket_dir = find_suitable_socket_dir(self.pgdata, self.runtime_path)
            argv = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), "-w"]
            argv += ["-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(self.log), "start"]
            pg_ctl.run(
                argv,
                env=dict(os.environ),
                timeout_s=START_TIMEOUT_S,
                done_when=lambda: is_ready(self.pgdata),
            )
        super().ensure_postgres_running()

    def ensure_pgdata_inited(self) -> None:
        """initdb when there is no cluster yet, then choir's settings: a new home's server
        runs with them from its first start."""
        super().ensure_pgdata_inited()
        settings.apply(self.pgdata)


@dataclass(frozen=True, slots=True)
class _Serving:
    """The server this object started or adopted: where its socket is, and its postmaster."""

    socket_dir: Path
    port: int
    pid: int


class EmbeddedPostgres:
    """One PostgreSQL server whose data lives in `datadir` and persists across restarts."""

    def __init__(self, datadir: Path, *, stop_on_exit: bool = True) -> None:
        self.datadir = datadir.expanduser().resolve()
        self.stop_on_exit = stop_on_exit
        self._serving: _Serving | None = None
        # start and stop run on threads (asyncio.to_thread) and choird's supervisor may restart
        # the server while someone else starts it: one at a time, so the second adopts the
        # first's postmaster instead of launching a rival that dies on the lock file.
        self._lifecycle = threading.Lock()
        self._starting: concurrent.futures.Future[ConnectParams] | None = None
        self._kept = False

    @property
    def log_file(self) -> Path:
        return self.datadir / "log"

    @property
    def params(self) -> ConnectParams:
        """How to reach the server's `postgres` database as superuser (Unix socket, no password)."""
        running = self._running()
        return ConnectParams(str(running.socket_dir), running.port, ADMIN_DATABASE, SUPERUSER)

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while started (it may have died since: see `alive`)."""
        return self._serving.pid if self._serving is not None else None

    def alive(self) -> bool:
        """Whether the postmaster this object started or adopted still runs (it may be busy
        recovering from a crash of one of its backends: that is its own business)."""
        running = self._serving
        return running is not None and is_postmaster_of(running.pid, self.datadir)

    def uri(self, database: str = ADMIN_DATABASE) -> str:
        """A `postgresql://` URI for `database` over the Unix socket (for psql and logs)."""
        running = self._running()
        return f"postgresql://{SUPERUSER}:@/{database}?host={running.socket_dir}"

    def start(self) -> ConnectParams:
        """Start the server (or adopt the one already serving `datadir`); blocking."""
        with self._lifecycle:
            return self._start()

    def _start(self) -> ConnectParams:
        self.datadir.mkdir(mode=0o700, parents=True, exist_ok=True)
        clear_stale_pidfile(self.datadir)
        settings.apply(self.datadir)
        started, log_offset = time.perf_counter(), self._log_size()
        try:
            self._serving = self._launch(log_offset)
        except (subprocess.SubprocessError, OSError, RuntimeError, AssertionError) as exc:
            raise UnavailableError(
                f"cannot start embedded Postgres in {self.datadir}: "
                f"{self._reason(exc, log_offset)}; see {self.log_file}"
            ) from exc
        _log.info(
            "embedded Postgres ready in %.2fs at %s", time.perf_counter() - started, self.uri()
        )
        return self.params

    def start_soon(self) -> None:
        """Begin `start` now on a thread of its own; entering the context waits for it. The
        server starts (0.1-0.3 s, in processes of its own) while the caller works on."""
        if self._starting is not None:
            return
        starting: concurrent.futures.Future[ConnectParams] = concurrent.futures.Future()

        def run() -> None:
            try:
                starting.set_result(self.start())
            except BaseException as exc:  # handed to whoever enters the context
                starting.set_exception(exc)

        self._starting = starting
        threading.Thread(target=run, name="postgres-start", daemon=True).start()

    def stop(self) -> None:
        """Stop the server (fast shutdown: sessions are disconnected, data is flushed); blocking.
        Nothing once `keep_running` was called."""
        with self._lifecycle:
            if self._kept:
                return
            running, self._serving = self._serving, None
            if running is None:
                return
            stop_postmaster(self.datadir)

    def keep_running(self) -> None:
        """Leave the server running when this object is done with it: choird re-executes
        itself (`choird.restart`) and its new image adopts the server. `stop` and the context's
        exit do nothing from now on."""
        self._kept = True
        self.stop_on_exit = False

    async def __aenter__(self) -> Self:
        starting, self._starting = self._starting, None
        try:
            if starting is not None:
                await asyncio.wrap_future(starting)
            else:
                await asyncio.to_thread(self.start)
            await wait_until_ready(self.params)
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.stop_on_exit:
            await asyncio.to_thread(self.stop)

    def _launch(self, log_offset: int) -> _Serving:
        try:
            return self._adopt_or_start()
        except subprocess.CalledProcessError:
            if "still in use" not in self._log_tail(log_offset):
                raise
        # A killed postmaster's children can hold its shared memory for a moment.
        deadline = time.monotonic() + SHMEM_RETRY_S
        while True:
            time.sleep(0.2)
            try:
                return self._adopt_or_start()
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise

    def _adopt_or_start(self) -> _Serving:
        if os.geteuid() == 0:
            return self._adopt_or_start_as_root()
        try:
            info = _UnmanagedServer(self.datadir, cleanup_mode=None).get_postmaster_info()
        finally:
            PostgresServer._instances.pop(self.datadir, None)
        assert info.socket_dir is not None
        assert info.pid is not None
        return _Serving(info.socket_dir, info.port or 5432, info.pid)

    def _adopt_or_start_as_root(self) -> _Serving:
        """The server already serving the directory, else one started by `RootServer`."""
        root = RootServer(self.datadir, POSTGRES_BIN_PATH.parent)
        found = live_postmaster(self.datadir)
        if found is None:
            root.start(ready=lambda: is_ready(self.datadir))
            found = live_postmaster(self.datadir)
        if found is None:
            raise RuntimeError("pg_ctl said the server started, but no postmaster runs")
        return _Serving(root.host_socket_dir(found.socket_dir), found.port, found.pid)

    def _running(self) -> _Serving:
        if self._serving is None:
            raise RuntimeError(f"embedded Postgres in {self.datadir} is not started")
        return self._serving

    def _reason(self, exc: BaseException, log_offset: int) -> str:
        """The server's own last words from this attempt, else the exception's first line."""
        lines = [line for line in self._log_tail(log_offset).splitlines() if line.strip()]
        if not lines and isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
            lines = [line for line in str(exc.stderr).splitlines() if line.strip()]
        if lines:
            return re.split(r"\b(?:FATAL|PANIC|ERROR):\s+", lines[-1])[-1].strip()
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    def _log_size(self) -> int:
        try:
            return self.log_file.stat().st_size
        except OSError:
            return 0

    def _log_tail(self, offset: int = 0) -> str:
        try:
            with self.log_file.open("rb") as log:
                log.seek(max(offset, self._log_size() - 4000))
                return log.read().decode(errors="replace")
        except OSError:
            return ""
