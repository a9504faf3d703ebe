"""What the console knows about choird: the latest listings, folded from the bridge's messages.

Pure and synchronous — no Textual, no I/O — so it is tested on its own and every view reads the
same picture. The app owns one `ConsoleState` (`app.state`) and folds every bridge message into it
before forwarding the message to the views; views read it, never write it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui.messages import ConnectionState

if TYPE_CHECKING:
    from choir.protocol.operator.answers import StatusAnswer
    from choir.protocol.operator.views import (
        AgentSummary,
        ApprovalView,
        HeldView,
        LaneView,
        LocksView,
        OutageView,
        SessionEndedView,
    )


@dataclass
class ConsoleState:
    """The console's picture of choird; see each attribute for the verb or feed kind behind it."""

    connection: ConnectionState = "connecting"
    """The bridge's link to choird."""
    connection_detail: str = ""
    """Why, when not connected (the one-line reason shown in the banner)."""
    status: StatusAnswer | None = None
    """The last `status` answer (Postgres, gateways, agents, config version)."""
    agents: dict[str, AgentSummary] = field(default_factory=dict)
    """agent id -> its `agent.list` entry."""
    lanes: dict[str, dict[str, LaneView]] = field(default_factory=dict)
    """session id -> lane id -> the lane's latest report (`lane` feed items, `session.cores`)."""
    locks: dict[str, LocksView] = field(default_factory=dict)
    """session id -> its lock table (`session.locks`, `locks` feed items)."""
    approvals: dict[str, ApprovalView] = field(default_factory=dict)
    """approval id -> the approval (`approval.list`, `approval` feed items)."""
    config_version: int | None = None
    """choird's running config version (`subscribed` and `config` feed items, `status`)."""
    selected_agent: str | None = None
    """The agent the per-agent views show; set only through `ChoirApp.select_agent`."""

    def set_agents(self, agents: list[AgentSummary]) -> None:
        self.agents = {agent.agent_id: agent for agent in agents}

    def set_status(self, status: StatusAnswer) -> None:
        self.status = status
        self.config_version = status.config_version

    def session_of(self, agent_id: str | None) -> str | None:
        """The agent's active session id, None when it is not running (or unknown)."""
        agent = self.agents.get(agent_id or "")
        if agent is None or agent.state != "running":
            return None
        return agent.session_id or None

    def agent_of(self, session_id: str) -> str | None:
        for agent_id, agent in self.agents.items():
            if agent.session_id == session_id:
                return agent_id
        return None

    def lane_reported(self, lane: LaneView) -> bool:
        """Fold a lane report in; True when the agent listing is stale: it lacks the session, or
        shows it not running (a crashed session that was resumed keeps its id)."""
        session_id = lane.session_id
        self.lanes.setdefault(session_id, {})[lane.lane] = lane
        agent_id = self.agent_of(session_id)
        return agent_id is None or self.agents[agent_id].state != "running"

    def set_lanes(self, session_id: str, lanes: list[LaneView]) -> None:
        self.lanes[session_id] = {lane.lane: lane for lane in lanes}

    def session_lanes(self, session_id: str | None) -> list[LaneView]:
        """The session's lanes, edge first, then core jobs by lane id."""
        lanes = self.lanes.get(session_id or "", {})
        return [lanes[lane] for lane in sorted(lanes, key=lambda lane: (lane != "edge", lane))]

    def held_jobs(self, session_id: str | None = None) -> list[HeldView]:
        """Core jobs held after a crash (their lane reports' `held`), of one session or all."""
        sessions = [session_id] if session_id is not None else list(self.lanes)
        return [
            lane.held
            for session in sessions
            for lane in self.lanes.get(session, {}).values()
            if lane.held
        ]

    def session_ended(self, data: SessionEndedView) -> None:
        if data.status != "active":
            self.lanes.pop(data.session_id, None)
            self.locks.pop(data.session_id, None)

    def approval_changed(self, approval: ApprovalView) -> None:
        if approval.status == "pending":
            self.approvals[approval.approval_id] = approval
        else:
            self.approvals.pop(approval.approval_id, None)

    def set_approvals(self, approvals: list[ApprovalView]) -> None:
        self.approvals = {row.approval_id: row for row in approvals}

    def interrupted(self) -> list[OutageView]:
        """The outage of every agent down after a crash, a fork or a failed restart
        (`agent.list`'s `interrupted`): why, when, and the command that brings it back."""
        return [agent.interrupted for agent in self.agents.values() if agent.interrupted]

    def running_count(self) -> int:
        return sum(agent.state == "running" for agent in self.agents.values())
