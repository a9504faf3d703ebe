"""Serving a test's aiohttp application on a free loopback port (the local stand-ins of outside
APIs: Brave Search, Notion, ElevenLabs)."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    """Start `app` on 127.0.0.1 and a port the kernel picks: its runner (`cleanup()` stops
    it) and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port: int = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port
