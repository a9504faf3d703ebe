"""What the lifecycle verbs keep between calls: the agent runtime, the sockets, each last start.

`OperatorContext` carries one `Lifecycle`, and the verbs that use it (`agents.lifecycle`,
`agents.update`) take that context: this module is what both sides share, so the context
never imports the verbs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from choir.daemon.runtimes.base import AgentRuntime, OpenSocket
from choir.protocol import VersionInfo
from choir.protocol.operator.requests import StartOverrides


@dataclass(frozen=True)
class Launched:
    """How this choird last started an agent: what restart and update start it with again."""

    overrides: StartOverrides
    """The start's overrides: a restart reverts transient ones to these."""
    version: VersionInfo
    """The version.json of what it runs."""
    root: Path | None
    """Its `/choir` tree on the host (process runtime); None for an image."""


@dataclass(frozen=True)
class SelfRestart:
    """How choird restarts itself in place (`choird.restart`): re-executed, same pid."""

    refusal: Callable[[], str | None]
    """Why it cannot re-execute itself (one line), or None."""
    begin: Callable[[], None]
    """Stop serving, agents left running, then re-execute."""


@dataclass(frozen=True)
class Lifecycle:
    """What the lifecycle verbs need beyond the context: the runtime and the agent sockets."""

    runtime: AgentRuntime
    open_socket: OpenSocket
    shutdown: Callable[[], None] | None = None
    """Stop choird itself (`shutdown`); None where the daemon cannot be stopped this way."""
    restart: SelfRestart | None = None
    """Restart choird in place (`choird.restart`); None: it runs inside another program."""
    launched: dict[str, Launched] = field(default_factory=dict)
    """Each agent's last start by this choird."""
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @asynccontextmanager
    async def exclusive(self, agent_id: str) -> AsyncIterator[None]:
        """One lifecycle verb at a time per agent."""
        async with self.locks.setdefault(agent_id, asyncio.Lock()):
            yield
