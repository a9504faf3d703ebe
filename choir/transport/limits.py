"""The bounds every listener enforces, so no peer can make choird buffer or wait without limit."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_FRAME = 1 << 20
"""1 MiB: far above any verb's payload; large data travels as files, not in one call."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_frame: int = DEFAULT_MAX_FRAME
    """Largest socket frame or HTTP request body, in bytes; larger ones are refused unread."""
    frame_timeout: float = 10.0
    """A frame (or request body) that started arriving must finish within this many seconds.
    An idle connection is fine; a half-sent frame is a stuck or hostile peer."""
    max_inflight: int = 64
    """Requests one socket connection may have running at once; more are answered
    `rate_limited` at once rather than queued."""
    max_discard: int = 16 << 20
    """An oversized frame up to this many bytes is skipped so the connection survives;
    a larger length prefix is taken as garbage and the connection is closed."""
    close_grace: float = 5.0
    """On shutdown, how long calls already running may take to finish before they are cancelled."""
    max_connections: int = 256
    """Connections one listener keeps open; one more is closed as soon as it is accepted, so a
    peer opening connections without end cannot use up choird's file descriptors."""
    max_connections_per_peer: int | None = 32
    """Connections one peer process (SO_PEERCRED pid) may keep open on a Unix socket, so one
    runaway client leaves room for the others (`choirctl status` during a flood). None: only
    `max_connections`. The HTTP listener caps only the total: there, agents are told apart by
    their lease on each request, not by their connection."""


AGENT_SOCKET_LIMITS = Limits(max_connections=16, max_connections_per_peer=8)
"""An agent's own socket: the agent needs two connections (calls, replication) and a few spare
for reconnecting; a tool inside the container that floods it fills only its own agent's socket,
and only half of it from one process."""
