"""A core job's event stream (§12.7) and its rate-limit notice, in the real `choir-agent`.

Same set-up as `test_lanes.py`, whose `launch` factory these tests reuse: a real choird, the
real agent binary, a `ScriptedModelServer` playing both edge and the job.
"""

from __future__ import annotations

from typing import Any

import pytest

from choir.scripted import RateLimitStep, ReplyStep, Script, ToolCallsStep
from tests.e2e.daemons import stored_events
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` and `root` are fixtures
    Launch,
    durable,
    launch,
    replies_until,
    root,
    run,
    spawn,
)

pytestmark = pytest.mark.slow

LONG = "x" * 300
"""An argument longer than a `tool_proposal` event carries."""

SCOUT_SCRIPT = Script(
    steps=[
        # The job's prompt has no user message: its unmatched steps come last.
        ToolCallsStep(match="start the scout", calls=[spawn("scout", "Scout the workspace.")]),
        ReplyStep(after="tool", match="scout started", text="Started scout."),
        ReplyStep(after="tool", match="xxxx", text="Scouted: one long line."),
        ToolCallsStep(text="I will echo a long line first.", calls=[run(f"echo {LONG}")]),
    ]
)


async def core_stream(agent: Any, lane: str) -> list[dict[str, Any]]:
    events = await stored_events(agent.daemon, agent.session_id)
    return [
        e.payload["event"]
        for e in events
        if e.lane == lane and e.event_type == "core_event_emitted"
    ]


async def test_a_core_step_commits_its_thought_summary_and_tool_proposals(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(SCOUT_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "please start the scout")
    replies = await replies_until(agent, sent["after_seq"], "core_report")
    assert replies[-1]["text"] == "core job scout completed: Scouted: one long line."
    await durable(agent, "core_stopped")
    stream = await core_stream(agent, "core:scout")
    assert [e["kind"] for e in stream] == [
        "progress",
        "thought_summary",
        "tool_proposal",
        "progress",
        "final_result",
    ]
    assert stream[1]["summary"] == "I will echo a long line first."
    proposal = stream[2]
    assert proposal["tool"] == "choir.exec"
    assert proposal["why"] == "I will echo a long line first."
    assert proposal["expected_output"] == ""
    command = proposal["args"]["command"]
    assert len(command) == 200
    assert command.startswith("echo xxx")
    assert command.endswith("\u2026")


WAIT_SCRIPT = Script(
    steps=[
        ToolCallsStep(match="start the waiter", calls=[spawn("waiter", "Wait politely.")]),
        ReplyStep(after="tool", match="waiter started", text="Started waiter."),
        RateLimitStep(retry_after="0"),
        ReplyStep(text="Waited."),
    ]
)


async def test_a_rate_limited_core_call_sends_one_notice_then_completes(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(WAIT_SCRIPT, rate_limit_retry_ms=50)
    sent = await agent.operator.chat_send("agent-1", "please start the waiter")
    replies = await replies_until(agent, sent["after_seq"], "core_report")
    notices = [r["text"] for r in replies if r["category"] == "notice"]
    assert notices == ["core job waiter is rate-limited; retrying in 0 s"]
    assert replies[-1]["text"] == "core job waiter completed: Waited."
    assert sum(r.status == 429 for r in agent.model.requests) == 1
