"""A starting agent's steps — INIT_HELLO too — wait out a choird restart, within a bound
(`StartPatience`).

A real Unix-socket server stands in for choird's agent socket, reached through the agent's own
`ReconnectingClient`: it closes while the agent starts and opens again, or never does. A lost or
refused connection, or choird answering "not now" (unavailable, rate limited), is waited out; a
refusal (an internal fault included) is not
(the start fails at once, as before); an outage past the patience fails the start in one line
that says choird was unreachable. The restart under a real choird and agent is
`tests/faults/test_start_rides_out_restart.py`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from choir.agent.replication.link import ReconnectingClient
from choir.agent.start_retry import ChoirdUnreachable, StartPatience
from choir.agent.startup import AgentOptions, open_client, say_hello
from choir.errors import ExitCode
from choir.protocol import ErrorCode
from choir.transport import Payload, Request, RpcError, UdsServer
from tests.harness.homes import short_root


@pytest.fixture
def socket() -> Iterator[Path]:
    with short_root("sr-") as root:
        yield root / "choird.sock"


class Choird:
    """Answers each call with its verb, after refusing the first `refusals` with `refusal`."""

    def __init__(self, refusal: RpcError | None = None, refusals: int = 0) -> None:
        self.calls = 0
        self.refusal = refusal
        self.refusals = refusals

    async def handle(self, request: Request) -> Payload:
        self.calls += 1
        if self.refusal is not None and self.calls <= self.refusals:
            raise self.refusal
        return {"verb": request.verb}

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        return False


async def serving(socket: Path, choird: Choird) -> UdsServer:
    server = UdsServer(socket, choird)
    await server.start()
    return server


def client_of(socket: Path) -> ReconnectingClient:
    return ReconnectingClient(socket, session_id="s-1", lease_token="t", connect_patience_s=5)


async def test_a_step_waits_for_a_restarted_choird(socket: Path) -> None:
    client, choird = client_of(socket), Choird()
    server = await serving(socket, choird)
    assert await client.call("INIT_HELLO") == {"verb": "INIT_HELLO"}
    await server.close()  # choird killed after INIT_HELLO

    async def restarted() -> UdsServer:
        await asyncio.sleep(0.8)
        return await serving(socket, choird)

    coming = asyncio.create_task(restarted())
    patience = StartPatience("agent-1", patience_s=10)
    answer = await patience.run(lambda: client.call("FETCH_DYNAMIC_CONFIG"), "loading the config")
    assert answer == {"verb": "FETCH_DYNAMIC_CONFIG"}
    assert (await patience.run(lambda: client.call("GET_SECRETS"), "loading the config")) == {
        "verb": "GET_SECRETS"
    }
    await client.close()
    await (await coming).close()


@pytest.mark.parametrize(
    "refusal",
    [
        RpcError(ErrorCode.UNAVAILABLE, "the database is restarting"),
        RpcError(ErrorCode.RATE_LIMITED, "session s-1 is over its request rate"),
    ],
    ids=["unavailable", "rate_limited"],
)
async def test_choird_answering_not_now_is_waited_out(socket: Path, refusal: RpcError) -> None:
    client = client_of(socket)
    choird = Choird(refusal, refusals=2)
    server = await serving(socket, choird)
    patience = StartPatience("agent-1", patience_s=10)
    answer = await patience.run(lambda: client.call("FETCH_EVENTS"), "fetching the handover")
    assert answer == {"verb": "FETCH_EVENTS"}
    assert choird.calls == 3
    await client.close()
    await server.close()


@pytest.mark.parametrize(
    "refusal",
    [
        RpcError(ErrorCode.UNAUTHORIZED, "session s-1 ended"),
        RpcError(ErrorCode.INTERNAL, "session s-1 ended in a fault"),
    ],
    ids=["unauthorized", "internal"],
)
async def test_a_refusal_fails_the_start_at_once(socket: Path, refusal: RpcError) -> None:
    client = client_of(socket)
    choird = Choird(refusal, refusals=5)
    server = await serving(socket, choird)
    patience = StartPatience("agent-1", patience_s=10)
    with pytest.raises(RpcError, match="session s-1 ended") as refused:
        await patience.run(lambda: client.call("FETCH_EVENTS"), "fetching the handover")
    assert refused.value.code == refusal.code
    assert choird.calls == 1
    await client.close()
    await server.close()


async def test_an_outage_past_the_patience_fails_the_start_in_one_line(socket: Path) -> None:
    client, choird = client_of(socket), Choird()
    server = await serving(socket, choird)
    await client.call("INIT_HELLO")
    await server.close()  # and no choird comes back
    patience = StartPatience("agent-1", patience_s=1.0)
    began = asyncio.get_running_loop().time()
    with pytest.raises(ChoirdUnreachable) as gave_up:
        await patience.run(lambda: client.call("FETCH_DYNAMIC_CONFIG"), "loading the config")
    waited = asyncio.get_running_loop().time() - began
    assert 1.0 <= waited < 4, waited
    message = gave_up.value.message
    assert message.startswith(
        "choird was unreachable for 1 s while agent-1 was starting (loading the config: "
    ), message
    assert message.endswith("(choirctl agent status agent-1 gives the command)"), message
    assert "\n" not in message
    assert gave_up.value.exit_code == ExitCode.UNAVAILABLE
    await client.close()


def agent_options(socket: Path, root: Path) -> AgentOptions:
    """agent-1 of session s-1 on `socket`, its version.json under `root` (as in an image)."""
    version = {
        "image_version": "test",
        "tool_manifest_hash": "0" * 64,
        "skill_manifest_hash": "1" * 64,
    }
    (root / "version.json").write_text(json.dumps(version))
    return AgentOptions(socket, root, root, "agent-1", "s-1", "t")


async def test_a_hello_waits_for_a_choird_not_listening_yet(socket: Path, tmp_path: Path) -> None:
    """choird restarting as the agent starts refuses its first connection: the agent's own
    client (`open_client`: each connection tried once) and the start's patience say INIT_HELLO
    again until the restarted choird answers it."""
    options = agent_options(socket, tmp_path)
    client, choird = await open_client(options), Choird()

    async def restarted() -> UdsServer:
        await asyncio.sleep(0.8)
        return await serving(socket, choird)

    coming = asyncio.create_task(restarted())
    answer = await say_hello(client, options, StartPatience("agent-1", patience_s=10))
    assert answer == {"verb": "INIT_HELLO"}
    assert choird.calls == 1
    await client.close()
    await (await coming).close()


async def test_a_refused_hello_fails_the_start_at_once(socket: Path, tmp_path: Path) -> None:
    """A restarted choird that did not adopt the agent (its lease expired) refuses the hello
    said again: that is no outage, and the start fails at once."""
    options = agent_options(socket, tmp_path)
    client = await open_client(options)
    choird = Choird(RpcError(ErrorCode.UNAUTHORIZED, "unknown session s-1"), refusals=5)
    server = await serving(socket, choird)
    with pytest.raises(RpcError) as refused:
        await say_hello(client, options, StartPatience("agent-1", patience_s=10))
    assert refused.value.code == ErrorCode.UNAUTHORIZED
    assert choird.calls == 1
    await client.close()
    await server.close()
