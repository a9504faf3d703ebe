"""The agent-facing control plane wired together: sessions, verbs, approvals, host tools.

The daemon builds this once its database pool and running config are up, hands `rpc` to the
listeners, and runs `sessions.reap()` and `approvals.expire_overdue()` periodically. When a
session ends, the per-session state of the other services is dropped with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from choir.daemon.agent_rpc import AgentRpc
from choir.daemon.agent_verbs import AgentVerbs
from choir.daemon.approvals import ApprovalService
from choir.daemon.artifact_verbs import ArtifactVerbs
from choir.daemon.config_stage import ConfigStage
from choir.daemon.hello import Greeter
from choir.daemon.host_tools import HostTools
from choir.daemon.inbox import Inbox
from choir.daemon.ratelimit import RateLimiter
from choir.daemon.replication import Replicator
from choir.daemon.session_state import Clock, SessionEnded, utc_now
from choir.daemon.sessions import SessionService
from choir.daemon.status_board import StatusBoard
from choir.store.pool import Pool


@dataclass(frozen=True)
class AgentServices:
    stage: ConfigStage
    sessions: SessionService
    approvals: ApprovalService
    host_tools: HostTools
    status: StatusBoard
    limiter: RateLimiter
    verbs: AgentVerbs
    rpc: AgentRpc
    replicator: Replicator
    inbox: Inbox
    """User messages accepted from DMs until their agent has them."""

    @classmethod
    def build(cls, pool: Pool, stage: ConfigStage, *, clock: Clock = utc_now) -> AgentServices:
        sessions = SessionService(pool, stage, clock=clock)
        approvals = ApprovalService(pool, stage, clock=clock)
        host_tools, status = HostTools(pool, clock=clock), StatusBoard()
        limiter = RateLimiter(lambda: stage.running.config.rpc.rate_limit_per_s)
        replicator = Replicator(pool, sessions, stage, clock=clock)
        inbox = Inbox(pool, sessions, clock=clock)
        verbs = AgentVerbs(
            stage=stage,
            sessions=sessions,
            greeter=Greeter(pool, sessions, stage, inbox),
            replicator=replicator,
            approvals=approvals,
            host_tools=host_tools,
            status=status,
            artifacts=ArtifactVerbs(pool),
            clock=clock,
        )
        services = cls(
            stage,
            sessions,
            approvals,
            host_tools,
            status,
            limiter,
            verbs,
            AgentRpc(verbs, sessions, stage, limiter),
            replicator,
            inbox,
        )
        sessions.subscribe(services._forget)
        return services

    def _forget(self, ended: SessionEnded) -> None:
        self.status.forget(ended.session_id)
        self.limiter.forget(ended.session_id)
        self.host_tools.forget(ended.session_id)
