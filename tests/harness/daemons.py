"""A real choird in the test process, and the ways an agent reaches it.

`running_daemon` is the composition root `choird` runs (database, services, operator socket,
agent listeners, timers), so everything past argument parsing is the production path. Both agent
transports are served at once: each agent's own Unix socket (`open_agent_socket`) and HTTPS on a
free loopback port with a self-signed certificate the client trusts explicitly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Final, Literal

from choir.agent.replication.control_plane import ControlPlane
from choir.daemon.app import ChoirDaemon, DaemonOptions
from choir.daemon.operator.api import operator_handler
from choir.daemon.runtimes.base import RuntimeChoice
from choir.home import ChoirHome
from choir.logs.formatter import JsonLinesFormatter
from choir.store.events import EventRecord, read_events
from choir.store.leases import Resource, leases_of
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionRow, get_session
from tests.e2e.agent_side import open_control_plane
from tests.harness.waits import poll_until as poll_until  # re-exported: tests import it here

Transport = Literal["uds", "https"]
TRANSPORTS: tuple[Transport, ...] = ("uds", "https")


@asynccontextmanager
async def running_daemon(
    home: ChoirHome,
    *,
    runtime: RuntimeChoice | None = "process",
    agents_over: Literal["uds", "http"] = "uds",
    listen: str = "127.0.0.1:0",
) -> AsyncIterator[ChoirDaemon]:
    """choird serving `home`: operator socket, agent sockets on demand, HTTPS on a free port;
    agents it starts run on `runtime` (the process runtime unless a test asks for another;
    None: config.json's `container.runtime`) and reach it over their sockets, or over HTTPS
    with `agents_over="http"` (what `choird --transport http` does)."""
    options = DaemonOptions(
        home,
        transport="http",
        listen=listen,
        tls_self_signed=True,
        runtime=runtime,
        agents_over=agents_over,
    )
    with choird_log(home):
        async with ChoirDaemon(options, operator=operator_handler) as daemon:
            yield daemon


CHOIR_LOGGERS: Final = ("choird", "choir")
"""The namespaces of choir's loggers (`choir.logs.get_logger`)."""


@contextmanager
def choird_log(home: ChoirHome) -> Iterator[None]:
    """choir's INFO lines and up in `logs/choird.log` while the block runs, as `choird` writes
    them: a test that fails attaches its tail (`tests.harness.failure_logs`), where pytest's
    capture alone keeps WARNING and up. choir's loggers are lowered to INFO for the block (the
    root logger stays as it was), and the file is closed after it. A test that set up choird's
    own logging (`choir.logs.setup_logging`) keeps it alone: its lines are not written twice."""
    path = os.path.abspath(home.choird_log)
    if any(getattr(h, "baseFilename", None) == path for h in logging.getLogger().handlers):
        yield
        return
    home.logs.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(home.choird_log, encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(JsonLinesFormatter("choird"))
    loggers = [logging.getLogger(name) for name in CHOIR_LOGGERS]
    levels = [each.level for each in loggers]
    root = logging.getLogger()
    root.addHandler(handler)
    for each in loggers:
        if each.getEffectiveLevel() > logging.INFO:
            each.setLevel(logging.INFO)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)
        root.removeHandler(handler)
        handler.close()


def certificate(daemon: ChoirDaemon) -> Path:
    """The self-signed certificate HTTPS clients must trust."""
    return daemon.home.root / "tls" / "choird.crt"


async def agent_target(
    daemon: ChoirDaemon, transport: Transport, agent_id: str = "agent-1"
) -> tuple[str | Path, Path | None]:
    """Where `agent_id` reaches choird over `transport`, and the certificate to trust."""
    if transport == "uds":
        return await daemon.open_agent_socket(agent_id), None
    assert daemon.http is not None, "the daemon was started without the HTTP transport"
    return daemon.http.url, certificate(daemon)


async def agent_control_plane(
    daemon: ChoirDaemon,
    transport: Transport,
    session_id: str,
    lease_token: str,
    *,
    agent_id: str = "agent-1",
) -> ControlPlane:
    """`agent_id`'s control plane to `daemon` over `transport`, calling as the given session."""
    target, ca_file = await agent_target(daemon, transport, agent_id)
    return await open_control_plane(target, session_id, lease_token, ca_file)


# -- what choird stored --------------------------------------------------------------------


def pool_of(daemon: ChoirDaemon) -> Pool:
    assert daemon.database is not None
    return daemon.database.pool


async def stored_events(daemon: ChoirDaemon, session_id: str) -> list[EventRecord]:
    async with pool_of(daemon).acquire() as conn:
        return await read_events(conn, session_id)


async def session_row(daemon: ChoirDaemon, session_id: str) -> SessionRow:
    async with pool_of(daemon).acquire() as conn:
        row = await get_session(conn, session_id)
    assert row is not None, f"no session {session_id}"
    return row


async def leased(daemon: ChoirDaemon, session_id: str) -> set[Resource]:
    """The resources the session holds leases on."""
    async with pool_of(daemon).acquire() as conn:
        return {lease.resource for lease in await leases_of(conn, session_id)}
