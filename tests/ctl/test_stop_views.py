"""What `choirctl agent stop` prints about the stopped process's exit: nothing for a clean exit,
the code otherwise, and "unknown" for an agent choird adopted after a restart (not its child)."""

from __future__ import annotations

import pytest

from choir.ctl.agent.views import stopped_lines
from choir.protocol.operator.answers import AgentStopped, StopSummary

SUMMARY = StopSummary(stored=True, rev=7, skipped=None, warn=False, detail="stored at rev 7")


@pytest.mark.parametrize(
    ("code", "first"),
    [
        (0, "agent-1 stopped: session s-1 stopped"),
        (None, "agent-1 stopped: session s-1 stopped (exit code unknown)"),
        (-9, "agent-1 stopped: session s-1 stopped (exit code -9)"),
    ],
)
def test_a_stop_says_how_the_process_exited_unless_cleanly(code: int | None, first: str) -> None:
    stopped = AgentStopped(
        agent_id="agent-1", session_id="s-1", status="stopped", exit_code=code, summary=SUMMARY
    )
    assert stopped_lines(stopped) == [first, "summary: stored at rev 7"]
