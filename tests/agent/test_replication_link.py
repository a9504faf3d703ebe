"""The agent's reconnecting client (issue 12.5): its first connection waits for choird.

A real Unix-socket server appears only after the agent's first call began, as when choird is
restarting while an agent starts; the call waits for it instead of failing. Once connected,
a lost connection fails the next call at once (the heartbeat sender's backoff decides).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.agent.replication.link import ReconnectingClient
from choir.transport import Payload, Request, TransportError, UdsServer
from tests.harness.homes import short_root


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_root("rl-") as root:
        yield root


class Echo:
    async def handle(self, request: Request) -> Payload:
        return {"verb": request.verb}

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return False


async def test_the_first_connection_waits_for_a_server_that_is_starting(short_dir: Path) -> None:
    socket = short_dir / "choird.sock"
    client = ReconnectingClient(socket, session_id="s-1", lease_token="t", connect_patience_s=10)

    async def late_server() -> UdsServer:
        await asyncio.sleep(0.5)
        server = UdsServer(socket, Echo())
        await server.start()
        return server

    starting = asyncio.create_task(late_server())
    answer = await client.call("PING")
    server = await starting
    assert answer == {"verb": "PING"}

    await server.close()
    async with asyncio.timeout(5):  # a later loss is not waited for
        with pytest.raises(TransportError):
            await client.call("PING")  # the connection is gone
        with pytest.raises(TransportError, match="cannot connect"):
            await client.call("PING")  # and so is the server: no patience any more
    await client.close()


async def test_without_a_server_the_first_call_fails_after_its_patience(short_dir: Path) -> None:
    client = ReconnectingClient(
        short_dir / "none.sock", session_id="s-1", lease_token="t", connect_patience_s=1.0
    )
    began = asyncio.get_running_loop().time()
    with pytest.raises(TransportError, match="cannot connect"):
        await client.call("PING")
    assert 0.5 < asyncio.get_running_loop().time() - began < 3
