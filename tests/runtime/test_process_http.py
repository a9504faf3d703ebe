"""Agents choird starts under `--transport http` reach it over verified HTTPS (§12.1, §12.4).

A real choird (`agents_over="http"`: what `choird --transport http` does) starts the real
choir-agent on the process runtime, in bwrap and unsandboxed. The agent's command line must
name choird's HTTPS endpoint and a copy of choird's certificate beside its socket (the one path
of `$CHOIR_HOME` the sandbox shows), the agent must hold a TCP connection to that port, chat must
work end to end, and the lease token must be in no process environment. The pure parts — the
URL agents use for a wildcard listener, the options they get — are checked on their own.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from choir.client import ChoirClient
from choir.daemon.runtimes.agent_link import (
    CERTIFICATE_NAME,
    HttpLink,
    control_plane_args,
    local_url,
)
from choir.home import ChoirHome
from tests.harness.chat import reply_to
from tests.harness.daemons import certificate, running_daemon, session_row
from tests.security.process_agents import SANDBOXES, Sandbox, use_sandbox


def choir_agent_under(pid: int) -> psutil.Process:
    """choir-agent itself: `pid`, or among its descendants (a wrapper's)."""
    for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        if any(Path(arg).name == "choir-agent" for arg in process.cmdline()[:2]):
            return process
    raise AssertionError(f"no choir-agent under pid {pid}")


def same_bytes(one: Path, other: Path) -> bool:
    return one.read_bytes() == other.read_bytes()


def environ_digests(pid: int) -> set[str]:
    """SHA-256 of each value in the process's environment (what `lease_id` is of the token)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return {hashlib.sha256(v.partition(b"=")[2]).hexdigest() for v in environ}


def option(cmdline: list[str], name: str) -> str:
    values = [arg.partition("=")[2] for arg in cmdline if arg.startswith(f"{name}=")]
    assert len(values) == 1, cmdline
    return values[0]


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_an_agent_started_under_transport_http_chats_over_verified_https(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox
) -> None:
    use_sandbox(sandbox, monkeypatch)
    async with (
        running_daemon(home, agents_over="http") as daemon,
        await ChoirClient.connect(home) as client,
    ):
        assert daemon.http is not None
        started = await client.agent_start("agent-1", {"dm": "console"})
        assert started.sandboxed is (sandbox == "bwrap")
        assert started.pid is not None
        agent = choir_agent_under(started.pid)
        cmdline = agent.cmdline()
        assert option(cmdline, "--control-plane") == "http"
        assert option(cmdline, "--endpoint") == daemon.http.url
        assert daemon.http.url.startswith("https://127.0.0.1:")
        trusted = Path(option(cmdline, "--ca-file"))
        assert trusted == home.agent_socket("agent-1").parent / CERTIFICATE_NAME
        assert same_bytes(trusted, certificate(daemon))
        assert "--lease-token-stdin" in cmdline

        reply = await reply_to(client, "hello")
        assert reply["text"].startswith("Hello!")
        port = urlsplit(daemon.http.url).port
        peers = [c.raddr for c in agent.net_connections("tcp") if c.raddr]
        assert any(peer.port == port for peer in peers), peers

        row = await session_row(daemon, started.session_id)
        for pid in (started.pid, agent.pid):
            assert row.lease_id not in environ_digests(pid)
        await client.agent_stop("agent-1")


@pytest.mark.slow
async def test_a_listener_on_another_address_is_named_in_the_certificate_agents_verify(
    home: ChoirHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """127.0.0.2 is this host but no name a default certificate carries: choird names the
    address it listens on in the certificate it creates, so its agents verify it."""
    use_sandbox("unsandboxed", monkeypatch)
    async with (
        running_daemon(home, agents_over="http", listen="127.0.0.2:0") as daemon,
        await ChoirClient.connect(home) as client,
    ):
        assert daemon.http is not None
        assert daemon.http.url.startswith("https://127.0.0.2:")
        await client.agent_start("agent-1", {"dm": "console"})
        reply = await reply_to(client, "hello")
        assert reply["text"].startswith("Hello!")
        await client.agent_stop("agent-1")


@pytest.mark.parametrize(
    ("listener", "agents_use"),
    [
        ("https://0.0.0.0:9400", "https://127.0.0.1:9400"),
        ("https://[::]:9400", "https://[::1]:9400"),
        ("https://127.0.0.1:9400", "https://127.0.0.1:9400"),
        ("https://choird.internal:9400", "https://choird.internal:9400"),
    ],
)
def test_agents_reach_a_wildcard_listener_on_loopback(listener: str, agents_use: str) -> None:
    assert local_url(listener) == agents_use


def test_agent_options_name_the_endpoint_and_the_certificate_beside_the_socket() -> None:
    socket = Path("/h/socks/agents/agent-1/choir.sock")
    assert control_plane_args(socket, None) == ["--control-plane=uds", f"--socket={socket}"]
    https = HttpLink("https://127.0.0.1:9400", Path("/h/tls/choird.crt"))
    assert control_plane_args(socket, https) == [
        "--control-plane=http",
        "--endpoint=https://127.0.0.1:9400",
        f"--socket={socket}",
        "--ca-file=/h/socks/agents/agent-1/choird.crt",
    ]
    plain = HttpLink("http://127.0.0.1:9400", None)
    assert control_plane_args(socket, plain)[:2] == [
        "--control-plane=http",
        "--endpoint=http://127.0.0.1:9400",
    ]
