"""Docker agents' HTTPS link (§12.1, `bridge_link`): the container's command, the bridge
certificate naming the gateway (and made again when the gateway moves), which network's
containers get the link, and — over real sockets and TLS — a bridge listener sharing the port of
a main listener on a wildcard address."""

from __future__ import annotations

import ssl
from contextlib import AsyncExitStack
from pathlib import Path

from choir.daemon.runtimes.agent_link import HttpLink
from choir.daemon.runtimes.bridge_link import (
    BridgeLink,
    bridge_certificate,
    certificate_names,
    open_bridge,
)
from choir.daemon.runtimes.container_spec import agent_command
from choir.transport import HttpServer
from choir.transport.client import connect
from choir.transport.tls import create_self_signed, server_context
from tests.transport.conftest import EchoHandler


def test_the_container_command_names_the_gateway_endpoint_and_the_certificate_in_run_choir() -> (
    None
):
    assert agent_command(None) == (
        "choir-agent",
        "--control-plane=uds",
        "--socket=/run/choir/choir.sock",
        "--root=/choir",
        "--workspace=/workspace",
        "--lease-token-stdin",
    )
    link = HttpLink("https://172.30.0.1:9400", Path("/h/tls/bridge.crt"))
    command = agent_command(link)
    assert command[1:5] == (
        "--control-plane=http",
        "--endpoint=https://172.30.0.1:9400",
        "--socket=/run/choir/choir.sock",
        "--ca-file=/run/choir/choird.crt",
    )
    assert command[-1] == "--lease-token-stdin"  # the token: stdin, never argv


def test_the_bridge_certificate_names_the_gateway_and_follows_it(tmp_path: Path) -> None:
    cert, key = bridge_certificate(tmp_path, "172.30.0.1")
    assert certificate_names(cert) == {"172.30.0.1"}
    first = cert.read_bytes()
    assert bridge_certificate(tmp_path, "172.30.0.1") == (cert, key)
    assert cert.read_bytes() == first  # kept: adopted agents hold a copy of it
    bridge_certificate(tmp_path, "172.31.0.1")  # the network was made again elsewhere
    assert certificate_names(cert) == {"172.31.0.1"}
    context = ssl.create_default_context(cafile=str(cert))  # a certificate a client can trust
    assert context.cert_store_stats()["x509"] == 1
    assert certificate_names(tmp_path / "missing.crt") == set()


def test_only_containers_on_the_bridged_network_get_the_link() -> None:
    link = HttpLink("https://172.30.0.1:9400", Path("/h/tls/bridge.crt"))
    bridged = BridgeLink("choir", link)
    assert bridged.on("choir") == link
    assert bridged.on("choir-host") is None  # config changed the policy since: its socket


class LoopbackBridge:
    """The docker network's side of `open_bridge`, with 127.0.0.2 as its gateway: an address
    of this host that is not the one the test's clients use for the main listener."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int]] = []

    async def bridge(self) -> tuple[str, str] | None:
        return "choir", "127.0.0.2"

    async def open_link(self, gateway: str, port: int) -> None:
        self.opened.append((gateway, port))

    async def close_link(self) -> None:
        self.opened.clear()


async def test_a_wildcard_listener_shares_its_port_with_the_bridge_listener(
    tmp_path: Path,
) -> None:
    main_cert, main_key = tmp_path / "main.crt", tmp_path / "main.key"
    create_self_signed(main_cert, main_key)  # names localhost and loopback, not the gateway
    handlers = {"main": EchoHandler(), "bridge": EchoHandler()}
    main = HttpServer(
        handlers["main"],
        host="0.0.0.0",
        ssl_context=server_context(main_cert, main_key),
        reuse_port=True,
    )
    network = LoopbackBridge()

    def serve(host: str, port: int, context: ssl.SSLContext) -> HttpServer:
        return HttpServer(
            handlers["bridge"], host=host, port=port, ssl_context=context, reuse_port=True
        )

    async with main, AsyncExitStack() as stack:
        bridged = await open_bridge(network, main, tmp_path, stack, serve)
        assert bridged is not None
        assert bridged.link.url == f"https://127.0.0.2:{main.port}"
        assert network.opened == [("127.0.0.2", main.port)]
        for _ in range(5):  # every connection to the gateway: the bridge listener, verified
            async with await connect(bridged.link.url, ca_file=bridged.link.certificate) as c:
                await c.call("empty", {})
        async with await connect(f"https://127.0.0.1:{main.port}", ca_file=main_cert) as c:
            await c.call("empty", {})  # loopback: still the main listener, its certificate
    assert (len(handlers["bridge"].seen), len(handlers["main"].seen)) == (5, 1)
    assert network.opened == []  # the hole closed with the stack
