"""The control-plane transports (§12.1-12.5): Unix socket frames and HTTP(S), one Handler.

Server side: a `Handler` (business logic) served by `UdsServer` and/or `HttpServer`; business
logic pushes to agents through the `PushHub` both listeners share. Client side: `connect(target)`
returns a `Client` (`call`, `stream`, `pushes`) whatever the transport. Nothing here knows a
verb: the agent socket, the operator socket and HTTP all carry the same envelopes.

    hub = PushHub()
    async with UdsServer(path, handler, hub=hub), HttpServer(handler, hub=hub, port=9400):
        hub.push(session_id, {"kind": "config_changed", "config_version": 7})

    async with await connect(path, session_id=sid, lease_token=lease) as client:
        answer = await client.call("HEARTBEAT", payload)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from choir.transport.client import Client, connect
    from choir.transport.errors import CallTimeout, RpcError, TransportError
    from choir.transport.handler import Handler, Payload, Peer, Request, Stream
    from choir.transport.http.client import HttpClient
    from choir.transport.http.server import HttpServer
    from choir.transport.limits import DEFAULT_MAX_FRAME, Limits
    from choir.transport.pushhub import PushHub, PushSubscription
    from choir.transport.uds.client import UdsClient
    from choir.transport.uds.server import UdsServer

_HOMES = {
    "Client": "client",
    "connect": "client",
    "CallTimeout": "errors",
    "RpcError": "errors",
    "TransportError": "errors",
    "Handler": "handler",
    "Payload": "handler",
    "Peer": "handler",
    "Request": "handler",
    "Stream": "handler",
    "HttpClient": "http.client",
    "HttpServer": "http.server",
    "DEFAULT_MAX_FRAME": "limits",
    "Limits": "limits",
    "PushHub": "pushhub",
    "PushSubscription": "pushhub",
    "UdsClient": "uds.client",
    "UdsServer": "uds.server",
}
"""Public name -> the module defining it. Loaded on first use, so a socket client never
imports aiohttp, httpx or cryptography (choirctl starts fast)."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_FRAME",
    "CallTimeout",
    "Client",
    "Handler",
    "HttpClient",
    "HttpServer",
    "Limits",
    "Payload",
    "Peer",
    "PushHub",
    "PushSubscription",
    "Request",
    "RpcError",
    "Stream",
    "TransportError",
    "UdsClient",
    "UdsServer",
    "connect",
]
