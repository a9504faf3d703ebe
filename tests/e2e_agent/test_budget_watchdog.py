"""`per_job_wall_time_ms` is enforced by a watchdog, not only between steps (issue 19).

Before, a job whose step was a 30 s `choir.exec` or a 30 s model call ran past a 2 s budget until
the step ended. Now the step in flight is cancelled at the deadline: the exec's process is
killed, its call gets a committed `cancelled` result (the arbiter's way, so the log stays valid),
the job pauses to ask for more time (issue 19's budgets that ask) — seconds after the deadline,
not after the step — and, refused, ends `terminated` with the budget's code and the user hears
it. The real `choir-agent`, set up as `test_lanes.py`.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from choir.scripted import ReplyStep, Script, ToolCallsStep
from tests.e2e_agent.test_agent_process import Agent
from tests.e2e_agent.test_budget_ask import question
from tests.e2e_agent.test_budget_reload import ended_with
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` is a fixture
    Launch,
    durable,
    launch,
    replies_until,
    run,
    spawn,
)
from tests.harness.daemons import poll_until, stored_events
from tests.harness.processes import gone

pytestmark = pytest.mark.slow

WALL_MS = 2000
SLOW_S = 30
"""Far past the budget: a job that waits for its step to end fails the timing check."""


async def stopped_near_its_budget(agent: Agent) -> str:
    """The job's `core_started` to its budget question (the step cut, the job paused), as
    choird stored them: the budget, plus the time to cancel the step, commit and ask (generous
    on a loaded 2-core machine). Rejecting the question then ends the job; its report."""
    asked = await question(agent, within=SLOW_S / 2)
    assert (asked.payload["budget"], asked.payload["limit"]) == ("per_job_wall_time_ms", WALL_MS)
    await durable(agent, "core_started")
    events = await stored_events(agent.daemon, agent.session_id)
    [began] = [e.created_at for e in events if e.event_type == "core_started"]
    assert asked.created_at is not None
    paused = (datetime.fromisoformat(asked.created_at) - began).total_seconds()
    assert WALL_MS / 1000 - 0.2 <= paused < WALL_MS / 1000 + 2.5, f"paused after {paused:.1f} s"
    await agent.operator.approval_reject(asked.approval_id)
    return f"the extension was refused ({asked.approval_id})"


def script(job_step: ToolCallsStep | ReplyStep) -> Script:
    return Script(
        steps=[
            ToolCallsStep(match="start the slow job", calls=[spawn("slow", "Be slow.")]),
            ReplyStep(after="tool", match="slow started", text="Started slow."),
            job_step,  # a core job's requests match only this step
        ]
    )


SLOW_EXEC = ToolCallsStep(repeat=True, calls=[run(f"echo $$ > pid.txt; exec sleep {SLOW_S}")])
SLOW_MODEL = ReplyStep(repeat=True, delay_ms=SLOW_S * 1000, text="Done, eventually.")


async def test_a_slow_exec_is_cancelled_at_the_jobs_wall_time(launch: Launch) -> None:  # noqa: F811
    agent = await launch(script(SLOW_EXEC), budgets={"per_job_wall_time_ms": WALL_MS})
    began = time.monotonic()
    sent = await agent.operator.chat_send("agent-1", "start the slow job")
    pid_file = agent.workspace / "pid.txt"
    await poll_until(lambda: pid_file.is_file() and pid_file.read_text().strip() != "", within=10)
    pid = int(pid_file.read_text())

    refused = await stopped_near_its_budget(agent)
    await poll_until(lambda: gone(pid), within=5)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=SLOW_S / 2)
    took = time.monotonic() - began
    report = f"core job slow exceeded per_job_wall_time_ms ({WALL_MS}); {refused}"
    assert replies[-1]["text"] == f"core job slow terminated: {report}"
    assert took < SLOW_S / 2, f"the job ended {took:.1f} s after the message"

    await durable(agent, "core_stopped")
    stopped, error = await ended_with(agent, "slow")
    assert (stopped["outcome"], stopped["report"]) == ("terminated", report)
    assert (error["kind"], error["code"]) == ("error", "budget_exceeded")
    events = await stored_events(agent.daemon, agent.session_id)
    lane = [e for e in events if e.lane == "core:slow"]
    intents = [e.payload["call_id"] for e in lane if e.event_type == "tool_call_committed"]
    results = [e.payload for e in lane if e.event_type == "tool_result_committed"]
    assert [r["call_id"] for r in results] == intents  # every intent has its outcome
    assert results[-1]["result"]["status"] == "cancelled"


async def test_a_slow_model_call_is_cancelled_at_the_jobs_wall_time(launch: Launch) -> None:  # noqa: F811
    agent = await launch(script(SLOW_MODEL), budgets={"per_job_wall_time_ms": WALL_MS})
    began = time.monotonic()
    sent = await agent.operator.chat_send("agent-1", "start the slow job")
    refused = await stopped_near_its_budget(agent)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=SLOW_S / 2)
    took = time.monotonic() - began
    report = f"core job slow exceeded per_job_wall_time_ms ({WALL_MS}); {refused}"
    assert replies[-1]["text"] == f"core job slow terminated: {report}"
    assert took < SLOW_S / 2, f"the job ended {took:.1f} s after the message"
    await durable(agent, "core_stopped")
    events = await stored_events(agent.daemon, agent.session_id)
    job_kinds = [e.event_type for e in events if e.lane == "core:slow"]
    assert "model_output" not in job_kinds  # the call was cut, never answered
