"""How an agent choird starts reaches it (§12.1): its own Unix socket, or choird's HTTP(S).

Under `choird --transport http`, the process runtime starts choir-agent with
`--control-plane=http --endpoint=<choird's listener>`: every call carries the lease token in its
`Authorization` header, the pushes come over SSE, and over HTTPS the agent verifies choird
against the certificate choird serves (a copy of it, `choird.crt`, beside the agent's socket:
the one directory of `$CHOIR_HOME` a sandboxed agent sees). The lease token still goes in on
stdin, never in the environment (§14.1). A listener on a wildcard address is reached on
loopback, a name the self-signed certificate carries.

The agent's `--socket` stays on its command line: it is how a later choird recognises the agent
as one of this home's (`_orphans`, adoption), though the agent does not connect to it.

The docker runtime's agents use HTTPS too, but not the listener on loopback: a container's
loopback is its own. choird opens a second listener on the choir network's bridge gateway (the
host's address on that network, `bridge_link`), at the same port, serving a self-signed
certificate of its own that names that address (`tls/bridge.crt`); the egress filter opens
exactly that address and port, TCP, to the network (`egress.open_link`) and still refuses the
rest of the host. The container gets `--endpoint=https://<gateway>:<port>` and the certificate
in its socket directory (`/run/choir/choird.crt`, the one host directory it mounts). A main
listener on a wildcard address shares its port with that one (SO_REUSEPORT: the specific bind
takes the gateway's connections). Where no such listener can be (the gateway's port is taken;
the agent's network is not the one choird started with), the agent keeps its socket, logged.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

CERTIFICATE_NAME: Final = "choird.crt"
"""choird's certificate, copied beside the agent's socket for the agent to trust."""


@dataclass(frozen=True)
class HttpLink:
    """choird's HTTP(S) listener as agents on this host reach it."""

    url: str
    """`https://127.0.0.1:9400` (or http:// over loopback without TLS)."""
    certificate: Path | None
    """The certificate choird serves (None: plain HTTP); agents trust exactly it (§12.4)."""


LinkFn = Callable[[], HttpLink | None]
"""The link agents started now use; None: their own Unix socket."""
NetworkLinkFn = Callable[[str], HttpLink | None]
"""The link containers on the named docker network use; None: their own Unix socket."""


def no_link() -> HttpLink | None:
    return None


def no_network_link(network: str) -> HttpLink | None:
    return None


def is_wildcard(host: str) -> bool:
    """Whether `host` is a wildcard address (0.0.0.0, ::): every address of the host."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def local_url(listener_url: str) -> str:
    """The listener's URL with a wildcard host (0.0.0.0, ::) replaced by loopback."""
    parts = urlsplit(listener_url)
    host = parts.hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return listener_url
    if not address.is_unspecified:
        return listener_url
    loopback = "[::1]" if address.version == 6 else "127.0.0.1"
    return urlunsplit(parts._replace(netloc=f"{loopback}:{parts.port}"))


def endpoint_of(url: str) -> tuple[str, int] | None:
    """The host and port of an endpoint URL; None without an explicit port."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        return None
    return parts.hostname, parts.port


def control_plane_args(socket: Path, link: HttpLink | None) -> list[str]:
    """choir-agent's control-plane options: the socket, or the endpoint and what it trusts."""
    if link is None:
        return ["--control-plane=uds", f"--socket={socket}"]
    args = ["--control-plane=http", f"--endpoint={link.url}", f"--socket={socket}"]
    if link.certificate is not None:
        args.append(f"--ca-file={socket.parent / CERTIFICATE_NAME}")
    return args


def place_certificate(socket: Path, link: HttpLink | None, *, mode: int = 0o600) -> None:
    """Copy choird's certificate beside the agent's socket: 0600 for an agent running as
    choird's uid (the process runtime); 0644 for a container's uid, which may read it but,
    the file and directory being choird's, neither change nor replace it (docker)."""
    if link is None or link.certificate is None:
        return
    target = socket.parent / CERTIFICATE_NAME
    partial = target.with_name(f".{CERTIFICATE_NAME}.{os.getpid()}")
    shutil.copyfile(link.certificate, partial)
    partial.chmod(mode)
    partial.replace(target)
