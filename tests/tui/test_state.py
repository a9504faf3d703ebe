"""`ConsoleState`: what the console knows, folded from the bridge's messages (pure)."""

from __future__ import annotations

from tests.tui.sample import AGENTS, LANES, SESSION
from tui.state import ConsoleState


def test_sessions_lanes_and_approvals_fold_in_and_out():
    state = ConsoleState()
    state.set_agents(AGENTS)
    assert state.session_of("default") == SESSION
    assert state.session_of("reviewer") is None  # stopped: no active session
    assert state.running_count() == 1

    for lane in reversed(LANES):
        assert not state.lane_reported(lane)  # a known session
    assert [lane["lane"] for lane in state.session_lanes(SESSION)] == [
        "edge",
        "core:docs",
        "core:refactor-auth",
        "core:write-tests",
    ]
    assert state.lane_reported({**LANES[0], "session_id": "s-new"})  # unknown: re-read agents
    crashed = [{**AGENTS[0], "state": "crashed"}, *AGENTS[1:]]
    state.set_agents(crashed)
    assert state.lane_reported(LANES[0])  # its crashed session was resumed: re-read agents
    state.set_agents(AGENTS)

    state.approval_changed({"approval_id": "ap-1", "status": "pending"})
    state.approval_changed({"approval_id": "ap-2", "status": "pending"})
    state.approval_changed({"approval_id": "ap-1", "status": "approved"})
    assert list(state.approvals) == ["ap-2"]

    state.locks[SESSION] = {"session_id": SESSION, "locks": []}
    state.session_ended({"session_id": SESSION, "status": "stopped"})
    assert state.session_lanes(SESSION) == []
    assert SESSION not in state.locks
