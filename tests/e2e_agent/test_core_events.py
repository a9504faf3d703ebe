"""A core job's event stream (§12.7), its reports and questions, its rate-limit notice, in the
real `choir-agent`.

Same set-up as `test_lanes.py`, whose `launch` factory these tests reuse: a real choird, the
real agent binary, a `ScriptedModelServer` playing both edge and the job.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from choir.scripted import RateLimitStep, ReplyStep, Script, ScriptedCall, ToolCallsStep
from tests.e2e_agent.test_budget_reload import refuse_the_question
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` is a fixture
    Launch,
    durable,
    launch,
    replies_until,
    run,
    spawn,
    system_texts,
)
from tests.harness.daemons import poll_until, stored_events

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
    replies = await replies_until(agent, sent.after_seq, "core_report")
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
    replies = await replies_until(agent, sent.after_seq, "core_report")
    notices = [r["text"] for r in replies if r["category"] == "notice"]
    assert notices == ["core job waiter is rate-limited; retrying in 0 s"]
    assert replies[-1]["text"] == "core job waiter completed: Waited."
    assert sum(r.status == 429 for r in agent.model.requests) == 1


# -- choir.core.report: plan, partial_result, need_info ------------------------------------------


def report(**arguments: Any) -> ScriptedCall:
    return ScriptedCall(name="choir.core.report", arguments=arguments)


def inject(job: str, content: str) -> ScriptedCall:
    return ScriptedCall(name="choir.core.inject", arguments={"job_name": job, "content": content})


PLAN = [{"description": "ask which colour"}, {"description": "write colour.txt"}]
ANSWER = "The user says the colour is teal."

ASK_SCRIPT = Script(
    steps=[
        # edge
        ToolCallsStep(
            match="start the asker",
            calls=[spawn("asker", "Write the user's colour to colour.txt.")],
        ),
        ReplyStep(after="tool", match="asker started", text="Started asker."),
        ToolCallsStep(match="colour is teal", calls=[inject("asker", ANSWER)]),
        ReplyStep(after="tool", match="answer delivered", text="Passed it on."),
        # the job: plan -> partial result -> question -> (answer) -> write -> report
        ToolCallsStep(
            after="tool",
            match="plan reported",
            calls=[report(kind="partial_result", text="Palette checked", data={"candidates": 3})],
        ),
        ToolCallsStep(
            after="tool",
            match="partial_result reported",
            calls=[report(kind="need_info", text="Which colour?", missing=["the colour"])],
        ),
        ToolCallsStep(
            after="tool",
            match="edge answered",
            calls=[
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "colour.txt", "op": "overwrite", "content": "teal\n"},
                )
            ],
        ),
        ReplyStep(after="tool", match="colour.txt", text="Wrote teal to colour.txt."),
        ToolCallsStep(calls=[report(kind="plan", steps=PLAN)]),
    ]
)


async def core_states(agent: Any) -> dict[str, str]:
    cores = await agent.operator.session_cores(agent.session_id)
    return {core.job_name: core.state for core in cores.cores}


def core_requests_after(agent: Any, marker: str) -> list[dict[str, Any]]:
    """Request bodies with a tool result containing `marker`."""
    return [
        r.body
        for r in agent.model.requests
        if any(m["role"] == "tool" and marker in m["content"] for m in r.body["messages"])
    ]


async def test_a_job_reports_its_plan_and_partial_result_and_waits_for_its_question(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(ASK_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "please start the asker")
    replies = await replies_until(agent, sent.after_seq, "core_question")
    told = {(r["category"], r["text"]) for r in replies}
    assert ("reply", "Started asker.") in told
    assert ("core_update", "core job asker plan: 1. ask which colour; 2. write colour.txt") in told
    assert ("core_update", "core job asker partial result: Palette checked") in told
    assert replies[-1]["text"] == (
        "core job asker needs information: Which colour? (missing: the colour)"
    )

    # The job waits, shown as waiting, and takes no next step until it is answered.
    await poll_until(lambda: _is_waiting(agent), within=10)
    await asyncio.sleep(0.5)
    assert core_requests_after(agent, "edge answered") == []
    assert core_requests_after(agent, "needs information") == []

    sent = await agent.operator.chat_send("agent-1", "the colour is teal")
    replies = await replies_until(agent, sent.after_seq, "core_report")
    assert ("reply", "Passed it on.") in {(r["category"], r["text"]) for r in replies}
    assert replies[-1]["text"] == "core job asker completed: Wrote teal to colour.txt."
    assert (agent.workspace / "colour.txt").read_text() == "teal\n"

    # Edge saw the question in its window; the job got the answer right after its call's result.
    [edge_turn] = [
        r.body
        for r in agent.model.requests
        if "colour is teal" in json.dumps(r.body["messages"])
        and r.body["messages"][-1]["role"] == "user"
    ]
    assert "[CORE EVENT] core job asker needs information: Which colour?" in system_texts(edge_turn)
    note = {"role": "system", "content": f"[INJECTED] {ANSWER}"}
    answered = next(r.body for r in agent.model.requests if note in r.body["messages"])
    messages = answered["messages"]
    result = messages[messages.index(note) - 1]
    assert result["role"] == "tool"
    assert "edge answered" in result["content"]

    await durable(agent, "core_stopped")
    stream = await core_stream(agent, "core:asker")
    assert [e["kind"] for e in stream] == [
        "progress",
        "plan",
        "progress",
        "partial_result",
        "progress",
        "need_info",
        "progress",
        "tool_proposal",
        "progress",
        "final_result",
    ]
    assert stream[1]["steps"] == [{"description": s["description"], "done": False} for s in PLAN]
    assert stream[3]["data"] == {"candidates": 3}
    assert stream[5] == {
        "kind": "need_info",
        "question": "Which colour?",
        "missing": ["the colour"],
    }
    seen = await agent.operator.session_events(agent.session_id, from_rev=1, limit=500)
    operator_kinds = [
        e.payload["event"]["kind"] for e in seen.events if e.event_type == "core_event_emitted"
    ]
    assert operator_kinds == [e["kind"] for e in stream]  # choirctl session events shows them


async def _is_waiting(agent: Any) -> bool:
    return (await core_states(agent)).get("asker") == "CORE_WAITING_INFO"


BRIEF_SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="start the quiet job",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "quiet", "task_spec": "Plan.", "verbosity": "brief"},
                )
            ],
        ),
        ReplyStep(after="tool", match="quiet started", text="Started quiet."),
        ToolCallsStep(
            after="tool", match="invalid report", calls=[report(kind="plan", steps=PLAN)]
        ),
        ReplyStep(after="tool", match="plan reported", text="Planned quietly."),
        ToolCallsStep(calls=[report(kind="need_info")]),
    ]
)


async def test_a_brief_job_relays_no_updates_and_a_bad_report_is_refused(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(BRIEF_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "please start the quiet job")
    replies = await replies_until(agent, sent.after_seq, "core_report")
    assert {r["category"] for r in replies} == {"reply", "core_report"}
    assert replies[-1]["text"] == "core job quiet completed: Planned quietly."
    await durable(agent, "core_stopped")
    events = await stored_events(agent.daemon, agent.session_id)
    [refused, _] = [
        e.payload["result"]
        for e in events
        if e.lane == "core:quiet" and e.event_type == "tool_result_committed"
    ]
    assert refused["error_code"] == "invalid_input"
    assert refused["summary"] == "invalid report: need_info needs text: the question for the user"
    stream = [e["kind"] for e in await core_stream(agent, "core:quiet")]
    assert stream == ["progress", "progress", "plan", "progress", "final_result"]


LATE_SCRIPT = Script(
    steps=[
        ToolCallsStep(
            match="start the late job",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "late", "task_spec": "Ask.", "time_budget_ms": 1500},
                )
            ],
        ),
        ReplyStep(after="tool", match="late started", text="Started late."),
        ToolCallsStep(calls=[report(kind="need_info", text="Anyone there?")]),
    ]
)


async def test_an_unanswered_question_ends_with_the_jobs_time_budget(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(LATE_SCRIPT)
    sent = await agent.operator.chat_send("agent-1", "please start the late job")
    # The first reply includes the agent's start (`Agent.chat` allows it 60 s): the question's
    # 30 s count from the job's spawn, not from the agent's launch.
    await replies_until(agent, sent.after_seq, "reply", within=60)
    await refuse_the_question(agent, "per_job_wall_time_ms", 1500)  # out of time: it asks
    replies = await replies_until(agent, sent.after_seq, "core_report")
    assert "core job late needs information: Anyone there?" in [r["text"] for r in replies]
    assert replies[-1]["text"].startswith("core job late terminated:")
    await durable(agent, "core_stopped")
    events = await stored_events(agent.daemon, agent.session_id)
    [result] = [
        e.payload["result"]
        for e in events
        if e.lane == "core:late" and e.event_type == "tool_result_committed"
    ]
    assert result["error_code"] == "no_answer"
    # its wait ended at the deadline: it paused there, its model never called past it
    assert core_requests_after(agent, "no answer came") == []
    [stopped] = [e.payload for e in events if e.event_type == "core_stopped"]
    assert stopped["outcome"] == "terminated"
    assert "wall" in stopped["report"] or "time" in stopped["report"]
