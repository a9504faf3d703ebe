"""choird's HTTPS listener where docker agents reach it: the choir network's bridge gateway (§12.1).

Under `choird --transport http` on the docker runtime, choird listens a second time, on the
host's address on the agents' network (the bridge gateway: a container cannot reach the host's
loopback), at the port of its main listener — fixed across restarts when the operator fixes it,
so an adopted container's `--endpoint` still answers. Never on a wildcard address: only the
host and the containers on that bridge route to it. The listener always serves TLS with its
own self-signed certificate naming exactly the gateway (`tls/bridge.crt`, made again when the
network's gateway changed), whatever the main listener serves: the agent trusts exactly it. The
egress filter opens that address and port, TCP, to the network and nothing else of the host
(`egress.open_link`), closed again when choird stops.

A main listener on a wildcard address holds the port on the gateway too: it listens with
SO_REUSEPORT, so does this one, and Linux gives a connection to the most specific bind — the
gateway's connections reach this listener and its certificate, the rest the main one. When the
gateway's port is taken by another program, docker agents keep their sockets: logged, never a
failed choird start.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from cryptography import x509

from choir.daemon.runtimes.agent_link import HttpLink
from choir.logs import get_logger
from choir.transport.tls import create_self_signed, server_context

if TYPE_CHECKING:
    from choir.transport import HttpServer

log = get_logger("choird.runtime")

BRIDGE_CERTIFICATE: Final = "bridge.crt"
BRIDGE_KEY: Final = "bridge.key"


class Listener(Protocol):
    """choird's main HTTP(S) listener (`HttpServer`), started."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str: ...


class Bridged(Protocol):
    """The docker runtime's side: its network now, and the hole in its filter."""

    async def bridge(self) -> tuple[str, str] | None: ...

    async def open_link(self, gateway: str, port: int) -> None: ...

    async def close_link(self) -> None: ...


ServeFn = Callable[[str, int, ssl.SSLContext], "HttpServer"]
"""A listener like the main one (same handler, same push hub) at host, port, with TLS."""


@dataclass(frozen=True)
class BridgeLink:
    """Where choird listens for the containers of one docker network."""

    network: str
    link: HttpLink

    def on(self, network: str) -> HttpLink | None:
        """The link for a container on `network`: this one's, else None (its socket)."""
        return self.link if network == self.network else None


async def open_bridge(
    runtime: Bridged, main: Listener, tls_dir: Path, stack: AsyncExitStack, serve: ServeFn
) -> BridgeLink | None:
    """The bridge listener started and the filter opened to it, both undone by `stack`; None
    (docker agents keep their sockets, logged) when it cannot be."""
    where = await runtime.bridge()
    if where is None:
        log.warning("the agents' docker network has no gateway: they keep their sockets")
        return None
    network, gateway = where
    cert, key = await asyncio.to_thread(bridge_certificate, tls_dir, gateway)
    server = serve(gateway, main.port, server_context(cert, key))
    try:
        await stack.enter_async_context(server)
    except OSError as error:
        log.warning(
            f"cannot listen on {gateway}:{main.port} for docker agents ({error.strerror}): "
            "they keep their sockets",
            fields={"network": network},
        )
        return None
    await runtime.open_link(gateway, main.port)
    stack.push_async_callback(runtime.close_link)
    log.info(
        "agents in docker containers reach choird over HTTPS on their network's gateway",
        fields={"network": network, "endpoint": server.url},
    )
    return BridgeLink(network, HttpLink(server.url, cert))


def bridge_certificate(tls_dir: Path, gateway: str) -> tuple[Path, Path]:
    """The bridge listener's certificate and key, made when missing or not naming `gateway`
    (the network was made again on another subnet). Blocking."""
    cert, key = tls_dir / BRIDGE_CERTIFICATE, tls_dir / BRIDGE_KEY
    if not (key.exists() and gateway in certificate_names(cert)):
        create_self_signed(cert, key, names=(gateway,))
        log.info("created the bridge listener's certificate", fields={"names": [gateway]})
    return cert, key


def certificate_names(cert: Path) -> set[str]:
    """The subjectAltNames (IPs and DNS names) of the PEM certificate at `cert`; none when it is
    missing or unreadable."""
    try:
        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
        names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return set()
    ips = {str(address) for address in names.get_values_for_type(x509.IPAddress)}
    return ips | set(names.get_values_for_type(x509.DNSName))
