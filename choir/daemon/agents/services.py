"""The agent-facing control plane wired together: sessions, verbs, approvals, host tools.

The daemon builds this once its database pool and running config are up, hands `rpc` to the
listeners (each through an `AgentHandler`, which authenticates every call), and runs
`sessions.reap()` and `approvals.expire_overdue()` periodically. When a session ends, the
per-session state of the other services is dropped with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from choir.daemon.agents.artifacts import ArtifactVerbs
from choir.daemon.agents.hello import Greeter
from choir.daemon.agents.host_tools import HostTools
from choir.daemon.agents.ingest import EventIngest
from choir.daemon.agents.ratelimit import RateLimiter
from choir.daemon.agents.rpc import AgentRpc
from choir.daemon.agents.status_board import StatusBoard
from choir.daemon.agents.verbs import AgentVerbs
from choir.daemon.approvals import ApprovalService
from choir.daemon.gateway.inbox import Inbox
from choir.daemon.memory.keys import MemoryKeys
from choir.daemon.proposals.check import proposal_check
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import Clock, SessionEnded, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.store.postgres.pool import Pool


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
    replicator: EventIngest
    inbox: Inbox
    """User messages accepted from DMs until their agent has them."""
    memory_keys: MemoryKeys = field(default_factory=MemoryKeys)
    """The keys of encrypted memories choird holds (in memory only), by agent."""

    @classmethod
    def build(cls, pool: Pool, stage: ConfigStage, *, clock: Clock = utc_now) -> AgentServices:
        sessions = SessionService(pool, stage, clock=clock)
        approvals = ApprovalService(pool, stage, clock=clock, check=proposal_check(stage))
        host_tools, status = HostTools(pool, clock=clock), StatusBoard()
        limiter = RateLimiter(lambda: stage.running.config.rpc.rate_limit_per_s)
        replicator = EventIngest(pool, sessions, stage, clock=clock)
        inbox = Inbox(pool, sessions, clock=clock)
        verbs = AgentVerbs(
            stage=stage,
            sessions=sessions,
            greeter=Greeter(pool, stage, inbox),
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
            AgentRpc(verbs, stage, limiter),
            replicator,
            inbox,
        )
        sessions.subscribe(services._forget)
        replicator.subscribe(host_tools.jobs.replicated)  # a job's end closes its token
        return services

    def _forget(self, ended: SessionEnded) -> None:
        self.status.forget(ended.session_id)
        self.limiter.forget(ended.session_id)
        self.host_tools.forget(ended.session_id)
