"""Graceful stop (§17.2, §11.8) of the real `choir-agent`: safe points, deadline, hurry, resume.

Same set-up as `test_lanes.py` (a real choird in the test process, the real agent binary, a
`ScriptedModelServer`), whose `launch` factory these tests reuse. Each test stops the agent while
something is in flight and reads what choird stored: the committed log, the session's end status,
and the agent's own log line on what the lanes left behind.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.core.runner import STOPPED_REPORT
from choir.agent.lanes.edge import STOPPING_TEXT
from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.daemon.agents.ingest import committed_of
from choir.protocol import GENESIS_HASH, chain_break
from choir.scripted import ReplyStep, Script, ScriptedCall, ToolCallsStep
from choir.store.sessions import SessionStatus
from tests.e2e_agent.launch import launch_agent
from tests.e2e_agent.test_agent_process import Agent
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` is a fixture
    SUMMARY,
    Launch,
    launch,
    replies_until,
    run,
    spawn,
)
from tests.harness.daemons import poll_until, session_row, stored_events
from tests.harness.processes import gone

pytestmark = pytest.mark.slow

SLOW_COMMAND = "touch started.txt; sleep 1.5; echo slow-done"


def shutdown(agent: Agent, reason: str = "stop", **extra: Any) -> None:
    agent.daemon.hub.push(agent.session_id, {"kind": "shutdown", "reason": reason, **extra})


async def started(agent: Agent, name: str) -> None:
    """The job's command is running: it created `name` in the workspace."""
    await poll_until(lambda: (agent.workspace / name).exists(), within=15)


def lanes_stopped(test_root: Path, log_name: str = "agent") -> dict[str, Any]:
    """The fields of the agent's `lanes stopped` log line."""
    for line in (test_root / f"{log_name}.log").read_text().splitlines():
        record = json.loads(line)
        if record.get("message") == "lanes stopped":
            return dict(record)
    raise AssertionError("the agent logged no 'lanes stopped' line")


def tool_messages(agent: Agent) -> list[str]:
    """Every tool message the model was ever shown."""
    return [
        str(m["content"])
        for r in agent.model.requests
        for m in r.body["messages"]
        if m["role"] == "tool"
    ]


def results_of(events: list[Any], lane: str) -> list[dict[str, Any]]:
    return [
        e.payload["result"]
        for e in events
        if e.lane == lane and e.event_type == "tool_result_committed"
    ]


def chain_verifies(events: list[Any]) -> bool:
    records = [committed_of(e) for e in events]
    return chain_break(records, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True) is None


SLOW_SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        ToolCallsStep(match="start the slow job", calls=[spawn("slow", "Run the slow command.")]),
        ReplyStep(after="tool", match="slow started", text="Started slow."),
        ReplyStep(after="tool", match="slow-done", text="Finished the slow job."),
        ToolCallsStep(calls=[run(SLOW_COMMAND)]),
    ]
)


async def test_a_tool_call_in_flight_completes_and_no_next_step_starts(
    launch: Launch,  # noqa: F811
    root: Path,
) -> None:
    agent = await launch(SLOW_SCRIPT)
    await agent.chat("please start the slow job")
    await started(agent, "started.txt")
    shutdown(agent)
    assert await asyncio.wait_for(agent.process.wait(), 20) == 0

    events = await stored_events(agent.daemon, agent.session_id)
    [result] = results_of(events, "core:slow")
    assert result["status"] == "success"  # finished and committed, not cancelled
    assert "slow-done" in json.dumps(result)
    assert not any("slow-done" in message for message in tool_messages(agent))  # no next step
    [stopped] = [e.payload for e in events if e.event_type == "core_stopped"]
    assert (stopped["outcome"], stopped["report"]) == ("cancelled", STOPPED_REPORT)
    reports = [
        e.payload["text"]
        for e in events
        if e.event_type == "agent_replied" and e.payload["category"] == "core_report"
    ]
    assert reports == [f"core job slow cancelled: {STOPPED_REPORT}"]
    assert events[-1].event_type == "session_summary"
    assert chain_verifies(events)
    assert (await session_row(agent.daemon, agent.session_id)).status == SessionStatus.STOPPED
    left = lanes_stopped(root)
    assert (left["locks_held"], left["open_intents"]) == (0, 0)
    # everything before the summary (and its call's `llm_call`) was flushed
    assert events[-2].event_type == "llm_call"
    assert left["head_rev"] == events[-3].rev


EDGE_SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="read the notes",
            delay_ms=1500,
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "notes.txt"})],
        ),
        ReplyStep(after="tool", text="This answer must never be asked for."),
    ]
)


async def test_edge_ends_its_cycle_at_the_safe_point_and_runs_nothing_new(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(EDGE_SCRIPT)
    (agent.workspace / "notes.txt").write_text("alpha\n")
    sent = await agent.operator.chat_send("agent-1", "please read the notes")
    await poll_until(lambda: len(agent.model.requests) == 1, within=10)
    shutdown(agent, summary_timeout_ms=0)
    assert await asyncio.wait_for(agent.process.wait(), 20) == 0

    assert len(agent.model.requests) == 1  # the call in flight finished; none followed
    events = await stored_events(agent.daemon, agent.session_id)
    # a recall that found something is an event of its own before the call: not the point here
    edge = [e for e in events if e.lane == "edge" and e.event_type != "memory_recalled"]
    assert [e.event_type for e in edge] == [
        "user_msg",
        "llm_call",
        "model_output",
        "tool_call_requested",
        "tool_result_committed",
        "agent_replied",
    ]
    assert edge[2].payload["tool_calls"][0]["name"] == "choir.fs.read"
    assert edge[4].payload["result"]["error_code"] == "agent_stopping"
    reply = edge[5].payload
    assert (reply["category"], reply["text"]) == ("error", STOPPING_TEXT)
    assert reply["in_reply_to"] == sent.message_id
    assert (await session_row(agent.daemon, agent.session_id)).status == SessionStatus.STOPPED


STUCK_SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        ToolCallsStep(match="start the stuck job", calls=[spawn("stuck", "Sleep a long time.")]),
        ReplyStep(after="tool", match="stuck started", text="Started stuck."),
        ToolCallsStep(calls=[run("echo $$ > pid.txt; exec sleep 30")]),
    ]
)


async def running_pid(agent: Agent) -> int:
    pid_file = agent.workspace / "pid.txt"
    await poll_until(lambda: pid_file.is_file() and pid_file.read_text().strip() != "", within=15)
    return int(pid_file.read_text())


async def test_a_safe_point_past_the_deadline_is_cancelled_cleanly(
    launch: Launch,  # noqa: F811
    root: Path,
) -> None:
    agent = await launch(STUCK_SCRIPT, stop_timeout_ms=500)
    await agent.chat("please start the stuck job")
    pid = await running_pid(agent)
    began = time.monotonic()
    shutdown(agent)
    assert await asyncio.wait_for(agent.process.wait(), 20) == 0
    assert time.monotonic() - began < 10  # not the 30 s the command would take
    await poll_until(lambda: gone(pid), within=10)

    events = await stored_events(agent.daemon, agent.session_id)
    [result] = results_of(events, "core:stuck")
    assert result["status"] == "cancelled"
    [stopped] = [e.payload for e in events if e.event_type == "core_stopped"]
    assert (stopped["outcome"], stopped["report"]) == ("cancelled", "the agent is stopping")
    assert events[-1].event_type == "session_summary"
    assert chain_verifies(events)
    assert (await session_row(agent.daemon, agent.session_id)).status == SessionStatus.STOPPED
    left = lanes_stopped(root)
    assert (left["locks_held"], left["open_intents"]) == (0, 0)
    assert "lanes did not reach a safe point" in (root / "agent.log").read_text()


async def test_a_second_sigterm_hurries_the_stop(launch: Launch) -> None:  # noqa: F811
    slow_summary = Script(
        steps=[
            ReplyStep(match=SUMMARY_MARKER, delay_ms=20_000, text=SUMMARY),
            *STUCK_SCRIPT.steps[1:],
        ]
    )
    agent = await launch(slow_summary, stop_timeout_ms=60_000)
    await agent.chat("please start the stuck job")
    pid = await running_pid(agent)
    agent.process.send_signal(signal.SIGTERM)
    await asyncio.sleep(1.0)
    assert agent.process.returncode is None  # waiting for the job's safe point
    began = time.monotonic()
    agent.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(agent.process.wait(), 10) == 0
    assert time.monotonic() - began < 5
    await poll_until(lambda: gone(pid), within=10)

    events = await stored_events(agent.daemon, agent.session_id)
    assert [r["status"] for r in results_of(events, "core:stuck")] == ["cancelled"]
    assert "session_summary" not in [e.event_type for e in events]
    assert chain_verifies(events)
    assert (await session_row(agent.daemon, agent.session_id)).status == SessionStatus.STOPPED


async def test_a_restart_leaves_the_job_open_and_the_resumed_agent_finishes_it(
    launch: Launch,  # noqa: F811
    root: Path,
) -> None:
    agent = await launch(SLOW_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "please start the slow job")
    await started(agent, "started.txt")
    assert agent.daemon.services is not None
    agent.daemon.services.sessions.expect_shutdown(agent.session_id, "restart")
    shutdown(agent, "restart", summary_timeout_ms=0)
    assert await asyncio.wait_for(agent.process.wait(), 20) == 0
    row = await session_row(agent.daemon, agent.session_id)
    assert row.status == SessionStatus.SUSPENDED
    kinds = [e.event_type for e in await stored_events(agent.daemon, agent.session_id)]
    assert "core_stopped" not in kinds  # left open for the resumed session

    again = await launch_agent(
        agent.daemon, root, tree=root / "choir", workspace=agent.workspace, log_name="agent-2"
    )
    try:
        assert again.session_id == agent.session_id
        replies = await replies_until(agent, sent.after_seq, "core_report")
        assert replies[-1]["text"] == "core job slow completed: Finished the slow job."
    finally:
        again.process.kill()
        await again.process.wait()
    events = await stored_events(agent.daemon, agent.session_id)
    assert [r["status"] for r in results_of(events, "core:slow")] == ["success"]  # ran once
