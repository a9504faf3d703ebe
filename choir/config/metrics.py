"""config.json `metrics`: choird's Prometheus endpoint (§22.1), off unless `listen` is set.

It listens only where this host's own processes reach it — a loopback address or a Unix socket
under `$CHOIR_HOME` — because what it tells (agent and tool names, activity) is the operator's
and it has no authentication. Read at choird start (a change waits for a choird restart).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Final

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from choir.config.base import ConfigModel

UNIX_PREFIX: Final = "unix:"
LOOPBACK_NAMES: Final = frozenset({"localhost"})


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_listen(listen: str) -> tuple[str, int] | str:
    """`(host, port)` of a TCP `listen`, or the socket path (as written) of a `unix:` one."""
    if listen.startswith(UNIX_PREFIX):
        return listen.removeprefix(UNIX_PREFIX)
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def _listen(value: str) -> str:
    if value.startswith(UNIX_PREFIX):
        path = value.removeprefix(UNIX_PREFIX)
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise PydanticCustomError(
                "metrics_socket",
                "a unix socket path relative to $CHOIR_HOME, e.g. unix:socks/metrics.sock",
            )
        return value
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise PydanticCustomError(
            "metrics_listen",
            "host:port with a port 1-65535 (e.g. 127.0.0.1:9464), or unix:<path>",
        )
    if not _loopback(host):
        raise PydanticCustomError(
            "metrics_not_loopback",
            "must be a loopback address (127.0.0.1, ::1, localhost) or unix:<path>: the "
            "endpoint has no authentication",
        )
    return value


class MetricsConfig(ConfigModel):
    """choird's Prometheus metrics endpoint."""

    listen: Annotated[str, AfterValidator(_listen)] | None = None
    """Where choird serves `GET /metrics`: `127.0.0.1:9464` (a loopback address only), or
    `unix:socks/metrics.sock` (relative to $CHOIR_HOME, mode 0600). Absent or null: no
    endpoint (the default)."""
