"""`ConsoleState`: what the console knows, folded from the bridge's messages (pure)."""

from __future__ import annotations

from choir.protocol.operator.views import ApprovalView, LocksView, SessionEndedView
from tests.tui.sample import AGENTS, SESSION, agents, lanes
from tui.state import ConsoleState


def approval(approval_id: str, status: str) -> ApprovalView:
    return ApprovalView(
        approval_id=approval_id,
        agent_id="default",
        session_id=SESSION,
        request_type="config_change",
        status=status,
        created_at=None,
        resolved_at=None,
        resolved_by=None,
        payload={},
    )


def test_sessions_lanes_and_approvals_fold_in_and_out():
    state = ConsoleState()
    state.set_agents(agents())
    assert state.session_of("default") == SESSION
    assert state.session_of("reviewer") is None  # stopped: no active session
    assert state.running_count() == 1

    reports = lanes()
    for lane in reversed(reports):
        assert not state.lane_reported(lane)  # a known session
    assert [lane.lane for lane in state.session_lanes(SESSION)] == [
        "edge",
        "core:docs",
        "core:refactor-auth",
        "core:write-tests",
    ]
    # unknown: re-read agents
    assert state.lane_reported(reports[0].model_copy(update={"session_id": "s-new"}))
    crashed = agents([{**AGENTS[0], "state": "crashed"}, *AGENTS[1:]])
    state.set_agents(crashed)
    assert state.lane_reported(reports[0])  # its crashed session was resumed: re-read agents
    state.set_agents(agents())

    state.approval_changed(approval("ap-1", "pending"))
    state.approval_changed(approval("ap-2", "pending"))
    state.approval_changed(approval("ap-1", "approved"))
    assert list(state.approvals) == ["ap-2"]

    state.locks[SESSION] = LocksView(session_id=SESSION, reported_at=None, locks=[])
    ended = SessionEndedView(session_id=SESSION, agent_id="default", status="stopped", reason=None)
    state.session_ended(ended)
    assert state.session_lanes(SESSION) == []
    assert SESSION not in state.locks
