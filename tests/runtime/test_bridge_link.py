"""The pure parts of docker agents' HTTPS link (§12.1, `bridge_link`): the container's command,
the bridge certificate naming the gateway (and made again when the gateway moves), and which
network's containers get the link."""

from __future__ import annotations

import ssl
from pathlib import Path

from choir.daemon.runtimes.agent_link import HttpLink
from choir.daemon.runtimes.bridge_link import BridgeLink, bridge_certificate, certificate_names
from choir.daemon.runtimes.container_spec import agent_command


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
