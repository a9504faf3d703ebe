"""What every operator verb works with: choird's services, the database, the push channel.

The verbs live one noun per module (`operator_status`, `operator_sessions`, …) as functions of
an `OperatorContext` and their parsed payload, so each can be read and tested on its own and the
handler (`operator_api`) only dispatches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from choir.config import ChoirConfig
from choir.daemon.agents.services import AgentServices
from choir.daemon.gateway.console import ConsoleDm, PushFn
from choir.daemon.gateway.held import GatewayNews
from choir.daemon.gateway.telegram.status import BotStatus
from choir.daemon.health.board import DaemonHealth
from choir.daemon.operator.agents.launches import Lifecycle
from choir.daemon.operator.feed import OperatorFeed
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.sessions.outage import not_running
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import Clock
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError, NotFoundError
from choir.home import ChoirHome
from choir.store.postgres.pool import Pool
from choir.store.sessions import SessionRow, SessionStatus, get_session, previous_session

if TYPE_CHECKING:  # numpy and pgvector load with the first memory verb
    from choir.daemon.memory.closing.tool_rows import ToolRowBackfill
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.embedding.vector_models import VectorModels
    from choir.daemon.memory.reembed import Reembedder
    from choir.daemon.memory.store import MemoryStore


IN_A_DM: ContextVar[bool] = ContextVar("IN_A_DM", default=False)
"""Set while a DM's command runs a verb (`OperatorApi`'s in-process call): a DM's answer
travels through a chat (Telegram), so an encrypted item is never opened for it."""


@dataclass(frozen=True)
class OperatorContext:
    services: AgentServices
    pool: Pool
    push: PushFn
    feed: OperatorFeed
    clock: Clock
    started_at: datetime
    """When choird started (for its uptime)."""
    console: ConsoleDm = field(default_factory=ConsoleDm)
    """The console DM: `chat.send` and `chat.replies`."""
    lifecycle: Lifecycle | None = None
    """The agent runtime `agent.start`/`agent.stop` use; None where choird runs no agents."""
    health: DaemonHealth = field(default_factory=DaemonHealth)
    """choird's database and disk problems (`status`, the feed's `health` items)."""
    memory_store: Callable[[], MemoryStore | None] = lambda: None
    """The agents' memory (`memory.*`, `knowledge.*`), built at first use; None where choird
    serves none."""
    memory: MemoryService | None = None
    """choird's embedding service: query vectors, queue depth, breaker."""
    reembedder: Callable[[], Awaitable[Reembedder | None]] | None = None
    """`memory.reembed`'s runner, once session memory started; None where choird has none."""
    vector_models: VectorModels | None = None
    """Which agents' memory vectors are another model's (`status`)."""
    tool_backfill: Callable[[], Awaitable[ToolRowBackfill | None]] | None = None
    """`memory.backfill_tools`' runner, once session memory started; None where choird has
    none."""
    telegram_bots: dict[str, Callable[[], BotStatus]] = field(default_factory=dict)
    """How each Telegram bot choird started is doing, by gateway name (`status`,
    `gateway.status`); registered by the gateway when it starts."""
    proposals: ProposalApplier | None = None
    """Applies approved proposals (a skill: commit, merge, build, update); None where choird
    applies none."""
    admin_notices: list[Callable[[str], None]] = field(default_factory=list)
    """Who sends a message to every admin DM of a gateway (the recovery inbox's restart
    notice); registered by the gateway when it starts."""
    news: GatewayNews | None = None
    """The agents' news since before adoption, for the gateways (`held`); None: a gateway
    hears the services' from when it subscribes."""

    @property
    def stage(self) -> ConfigStage:
        return self.services.stage

    @property
    def sessions(self) -> SessionService:
        return self.services.sessions

    @property
    def config(self) -> ChoirConfig:
        """The running config."""
        return self.services.stage.running.config

    @property
    def home(self) -> ChoirHome:
        return self.services.stage.running.loaded.home

    def require_agent(self, agent_id: str) -> None:
        """NotFoundError unless `agent_id` is configured."""
        if agent_id not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none configured"
            raise NotFoundError(
                f"no agent named {agent_id!r} in the running config (known: {known}); "
                "see choirctl agent list"
            )

    async def latest_session(self, agent_id: str) -> SessionRow | None:
        """The agent's active session, else its last one (None if it never ran)."""
        async with self.pool.acquire() as conn:
            return await previous_session(conn, agent_id)

    async def running_session(self, agent_id: str, *, hint: str | None) -> SessionRow:
        """The configured agent's active session; if there is none, ConflictError saying why
        (a crash: its cause and when) and ending in `hint` — None: how to start it again."""
        self.require_agent(agent_id)
        latest = await self.latest_session(agent_id)
        if latest is None or latest.status != SessionStatus.ACTIVE:
            dm = self.config.agents[agent_id].defaults.dm
            raise ConflictError(not_running(agent_id, latest, self.clock(), hint, dm))
        return latest

    async def active_session(self, session_id: str) -> SessionRow:
        """An active session; NotFoundError or ConflictError (naming its status) otherwise."""
        async with self.pool.acquire() as conn:
            row = await get_session(conn, session_id)
        if row is None:
            raise NotFoundError(f"no session {session_id!r} (see choirctl session list)")
        if row.status != SessionStatus.ACTIVE:
            raise ConflictError(
                f"session {session_id} is not active (it is {row.status.value}): "
                f"start {row.agent_id} with choirctl agent start {row.agent_id}"
            )
        return row
