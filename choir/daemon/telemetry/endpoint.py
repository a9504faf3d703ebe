"""`GET /metrics` on a loopback port or a Unix socket (config.json `metrics.listen`).

An aiohttp server of its own on choird's loop (aiohttp is already choird's HTTP stack), serving
prometheus_client's exposition of choird's registry — the text format, or OpenMetrics when the
scraper asks for it. Before each exposition the gauges of state are read (`refresh`), so a scrape
costs a couple of small queries and nothing is polled between scrapes.

A port already in use or a socket path that cannot be bound stops choird's start with one line
naming `metrics.listen` and the fix: an operator who asked for metrics wants to know, not to
find the dashboard empty. A Unix socket is created mode 0600, like the operator socket.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from choir.config.metrics import split_listen
from choir.errors import ConfigError
from choir.logs import get_logger
from choir.transport.uds.sockfile import claim

log = get_logger("choird.metrics")

Refresh = Callable[[], Awaitable[None]]


def _app(registry: CollectorRegistry, refresh: Refresh) -> web.Application:
    expose = make_aiohttp_handler(registry)

    async def metrics(request: web.Request) -> web.StreamResponse:
        try:
            await refresh()
        except Exception as error:  # Postgres down: the counters are still worth serving
            log.warning("metrics: state gauges not refreshed", fields={"error": str(error)})
        return await expose(request)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def _bind_error(listen: str, error: OSError) -> ConfigError:
    if error.errno == errno.EADDRINUSE:
        why = "the address is already in use: stop what listens there or pick another port"
    else:
        why = f"{error.strerror or error}: pick another address"
    return ConfigError([f"metrics.listen {listen!r}: cannot listen: {why}"])


@contextlib.asynccontextmanager
async def serve_metrics(
    listen: str, home: Path, registry: CollectorRegistry, refresh: Refresh
) -> AsyncIterator[str]:
    """Serve `/metrics` on `listen` while inside; yields where it listens (`host:port`, or the
    socket's path)."""
    runner = web.AppRunner(_app(registry, refresh), access_log=None, handle_signals=False)
    await runner.setup()
    target = split_listen(listen)
    try:
        where = await _start(runner, listen, home)
    except BaseException:
        await runner.cleanup()  # a socket path another endpoint serves is left alone
        raise
    log.info("metrics endpoint listening", fields={"listen": where})
    try:
        yield where
    finally:
        await runner.cleanup()
        if isinstance(target, str):  # aiohttp leaves the socket file behind
            with contextlib.suppress(FileNotFoundError):
                (home / target).unlink()


async def _start(runner: web.AppRunner, listen: str, home: Path) -> str:
    target = split_listen(listen)
    try:
        if isinstance(target, str):
            path = home / target
            path.parent.mkdir(parents=True, exist_ok=True)
            claim(path, "another metrics endpoint")
            site: web.BaseSite = web.UnixSite(runner, str(path))
            await site.start()
            os.chmod(path, 0o600)
            return str(path)
        host, port = target
        site = web.TCPSite(runner, host, port, reuse_address=False)
        await site.start()
    except OSError as error:
        raise _bind_error(listen, error) from None
    return listen
