"""What choird keeps in memory about a session, and what an authenticated call knows.

Tokens are stored only as SHA-256 digests and compared in constant time; the token itself lives
in the agent's environment and in the `SessionContext` of the call that carried it.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from choir.protocol import ResourceBindings, VersionInfo
from choir.store.sessions import SessionStatus

TOKEN_BYTES: Final = 32
"""Entropy of a lease token: 256 bits, URL-safe base64 (43 characters)."""

SHUTDOWN_STATUS: Final = {
    "stop": SessionStatus.STOPPED,
    "restart": SessionStatus.SUSPENDED,
    "update": SessionStatus.SUSPENDED,
    "workspace_reset": SessionStatus.STOPPED,
}
"""How a session ends after each shutdown reason: restart and update resume it next start."""

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_lease_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """The digest stored in `sessions.lease_id`; a dump of the table holds no usable token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_session_id() -> str:
    return f"s-{secrets.token_hex(8)}"


RESUME_FAILED: Final = "resume failed: "
START_FAILED: Final = "start failed: "
"""How the end reason of a session whose agent could not resume (or start) it begins: the agent's
own reason follows, and `status` shows it as the crash's cause."""


def failed_start(resumed: bool, reason: str) -> str:
    """The end reason of a session its agent could not resume (`resumed`) or start."""
    return (RESUME_FAILED if resumed else START_FAILED) + reason


def shutdown_status(reason: str) -> SessionStatus:
    """The end status for a shutdown reason (§17.2; restart and update resume)."""
    return SHUTDOWN_STATUS.get(reason, SessionStatus.STOPPED)


@dataclass(frozen=True)
class StartedSession:
    """A session ready for its container: the token goes into the container's environment."""

    session_id: str
    lease_token: str = field(repr=False)
    bindings: ResourceBindings
    resumed: bool
    """True when an earlier session was resumed rather than a new one created."""


@dataclass(frozen=True, slots=True)
class SessionContext:
    """Who is calling, from an envelope whose token matched (§12.3): the session's live state
    itself, so a verb acts on what authentication found instead of looking the session up again."""

    live: LiveSession
    lease_token: str = field(repr=False)

    @property
    def session_id(self) -> str:
        return self.live.session_id

    @property
    def agent_id(self) -> str:
        return self.live.agent_id

    @property
    def bindings(self) -> ResourceBindings:
        return self.live.bindings


@dataclass(frozen=True)
class SessionEnded:
    """Told to subscribers when a session ends: they drop its state, the daemon its container."""

    session_id: str
    agent_id: str
    status: SessionStatus
    reason: str


@dataclass
class LiveSession:
    """An active session's state; choird is its only writer, so memory is authoritative."""

    session_id: str
    agent_id: str
    token_hash: str = field(repr=False)
    bindings: ResourceBindings
    resumed: bool
    ack_rev: int
    head_hash: str
    """Chain hash at `ack_rev` (GENESIS_HASH at 0)."""
    image: VersionInfo | None
    """The image recorded at start; INIT_HELLO refuses a container that differs."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    """Serializes heartbeats, so two cannot race from the same base."""
    link: str | None = None
    """How the agent's latest call reached choird: `unix socket`, or the HTTP(S) listener's
    URL (`agent status`); None before its first call to this choird."""

    def context(self, token: str) -> SessionContext:
        return SessionContext(self, token)
