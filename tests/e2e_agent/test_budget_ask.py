"""Budgets that ask instead of failing (issue 19): a job out of budget pauses and asks.

The real `choir-agent` with a scripted model whose core job calls `choir.exec` every step,
set up as `test_lanes.py`. The job runs out of `per_job_max_steps`: it pauses (CORE_WAITING_INFO)
with a `budget_extension` approval pending, and the user is told how to answer. Extending by an
amount resumes it for exactly that many more steps; rejecting stops it with a report that says
so; nobody answering within `approval_timeout_ms` stops it too, said as such. The wall-time
watchdog asks the same way, and so does edge when the session's tokens run out mid-reply. A
regular DM's extension for another agent is refused, and an
answer to a question already decided says how it ended.
"""

from __future__ import annotations

from typing import Any

import pytest

from choir.errors import ConflictError
from choir.protocol.operator.verbs import OperatorVerb as V
from choir.protocol.operator.views import ApprovalView
from choir.scripted import ReplyStep, Script, ToolCallsStep
from choir.scripted.script import ScriptedUsage
from tests.commands.test_dm_commands import command
from tests.e2e_agent.test_agent_process import Agent
from tests.e2e_agent.test_budget_reload import ended_with, intents
from tests.e2e_agent.test_lanes import (  # noqa: F401 — `launch` is a fixture
    Launch,
    durable,
    launch,
    replies_until,
    run,
    spawn,
)
from tests.harness.chat import replies_through
from tests.harness.daemons import poll_until

pytestmark = pytest.mark.slow

GRIND = Script(
    steps=[
        ToolCallsStep(match="grind", calls=[spawn("grind", "Tick for ever.")]),
        ReplyStep(after="tool", match="grind started", text="Started."),
        ToolCallsStep(repeat=True, calls=[run("echo tick")]),  # the job's every step
    ]
)
STEPS = {"per_job_max_steps": 2}


def tokens(prompt: int, completion: int) -> ScriptedUsage:
    return ScriptedUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


async def question(agent: Agent, within: float = 20) -> ApprovalView:
    """The one pending budget question, once it is asked."""
    found: list[ApprovalView] = []

    async def asked() -> bool:
        pending = (await agent.operator.approval_list()).approvals
        found[:] = [a for a in pending if a.request_type == "budget_extension"]
        return bool(found)

    await poll_until(asked, within=within)
    [view] = found
    return view


async def paused_notice(agent: Agent, after_seq: int) -> dict[str, Any]:
    replies = await replies_through(
        agent.operator, after_seq, lambda r: "is paused" in r["text"], within=20
    )
    return replies[-1]


async def job_state(agent: Agent) -> str | None:
    status = await agent.operator.agent_status("agent-1")
    return next((lane.state for lane in status.lanes if lane.lane == "core:grind"), None)


async def test_a_job_out_of_steps_pauses_asks_and_resumes_by_the_amount_extended(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(GRIND, budgets=STEPS)
    sent = await agent.operator.chat_send("agent-1", "grind")
    asked = await question(agent)
    assert asked.payload["budget"] == "per_job_max_steps"
    assert (asked.payload["limit"], asked.payload["used"], asked.payload["unit"]) == (2, 2, "steps")
    assert asked.payload["job_name"] == "grind"
    notice = await paused_notice(agent, sent.after_seq)
    assert f"/extend {asked.approval_id} <steps>" in notice["text"]
    assert notice["text"].startswith("core job grind is paused: core job grind exceeded")
    assert len(await intents(agent, "core:grind")) == 2

    async def waiting() -> bool:
        return await job_state(agent) == "CORE_WAITING_INFO"

    await poll_until(waiting, within=10)

    said = await command(agent.operator, "agent-1", f"/extend {asked.approval_id} 3")
    assert said == f"{asked.approval_id} extended by 3"  # the DM's answer, as choirctl's verb
    extended = await agent.operator.approval_show(asked.approval_id)
    assert (extended.status, extended.payload["granted"]) == ("approved", 3)
    again = await question(agent)  # three more steps, then the next question
    assert again.approval_id != asked.approval_id
    assert (again.payload["limit"], again.payload["used"]) == (5, 5)
    assert len(await intents(agent, "core:grind")) == 5

    stopped = await agent.operator.approval_reject(again.approval_id)
    assert stopped.status == "rejected"
    replies = await replies_until(agent, sent.after_seq, "core_report", within=20)
    report = (
        "core job grind exceeded per_job_max_steps (5); "
        f"the extension was refused ({again.approval_id})"
    )
    assert replies[-1]["text"] == f"core job grind terminated: {report}"
    assert any(
        r["text"].startswith("core job grind resumes: per_job_max_steps extended by 3")
        for r in replies
    )
    await durable(agent, "core_stopped")
    ended, error = await ended_with(agent, "grind")
    assert (ended["outcome"], ended["report"]) == ("terminated", report)
    assert error["code"] == "budget_exceeded"

    with pytest.raises(ConflictError, match=f"approval {again.approval_id} is already rejected"):
        await agent.operator.approval_extend(again.approval_id, 5)


async def test_nobody_answering_stops_the_job_and_says_so(launch: Launch) -> None:  # noqa: F811
    agent = await launch(GRIND, budgets=STEPS, approval_timeout_ms=1000)
    sent = await agent.operator.chat_send("agent-1", "grind")
    asked = await question(agent)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=30)
    report = (
        "core job grind exceeded per_job_max_steps (2); "
        f"nobody answered the question to extend it ({asked.approval_id}) in time"
    )
    assert replies[-1]["text"] == f"core job grind terminated: {report}"
    assert len(await intents(agent, "core:grind")) == 2
    shown = await agent.operator.approval_show(asked.approval_id)
    assert (shown.status, shown.resolved_by) == ("rejected", "timeout")  # silence is a rejection


async def test_a_regular_dm_cannot_extend_another_agents_budget(launch: Launch) -> None:  # noqa: F811
    agent = await launch(GRIND, budgets=STEPS)
    await agent.operator.chat_send("agent-1", "grind")
    asked = await question(agent)
    (agent.workspace.parent / "ws-other").mkdir()
    await agent.operator.agent_start("agent-2")  # its DM, ops, is a regular one
    refused = await command(
        agent.operator, "agent-2", f"/extend {asked.approval_id} 10", refused=True
    )
    assert refused.startswith(f"approval {asked.approval_id} belongs to agent-1, not agent-2")
    with pytest.raises(ConflictError, match="belongs to agent-1, not agent-2"):
        await agent.operator.ask(
            V.APPROVAL_EXTEND,
            ApprovalView,
            approval_id=asked.approval_id,
            amount=10,
            by="dm-of-agent-2",
            agent_id="agent-2",
        )
    assert (await agent.operator.approval_show(asked.approval_id)).status == "pending"
    assert len(await intents(agent, "core:grind")) == 2
    # a plain approve (the DM's button) extends by the amount the question suggested
    approved = await agent.operator.approval_approve(asked.approval_id)
    assert approved.payload["granted"] == asked.payload["suggested"] == 2
    again = await question(agent)
    assert (again.payload["limit"], again.payload["used"]) == (4, 4)


SLOW = Script(
    steps=[
        ToolCallsStep(match="grind", calls=[spawn("grind", "Be slow.")]),
        ReplyStep(after="tool", match="grind started", text="Started."),
        ToolCallsStep(repeat=True, calls=[run("sleep 30")]),
    ]
)


async def test_the_wall_time_watchdog_asks_too_and_an_extension_buys_time(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(SLOW, budgets={"per_job_wall_time_ms": 2000})
    sent = await agent.operator.chat_send("agent-1", "grind")
    asked = await question(agent)
    assert (asked.payload["budget"], asked.payload["limit"]) == ("per_job_wall_time_ms", 2000)
    [first] = await intents(agent, "core:grind")  # cut at the deadline, its result committed
    await agent.operator.approval_extend(asked.approval_id, 1500)
    again = await question(agent)  # the next step ran 1.5 s more, then was cut again
    assert again.payload["budget"] == "per_job_wall_time_ms"
    assert len(await intents(agent, "core:grind")) == 2
    await agent.operator.approval_reject(again.approval_id)
    replies = await replies_until(agent, sent.after_seq, "core_report", within=20)
    assert replies[-1]["text"].startswith("core job grind terminated: core job grind exceeded")
    assert first["tool"] == "choir.exec"


TALL = Script(
    steps=[
        ToolCallsStep(match="count", calls=[run("echo one")], usage=tokens(400, 100)),
        ReplyStep(after="tool", match="one", text="Counted.", usage=tokens(10, 5)),
    ]
)


async def edge_state(agent: Agent) -> str | None:
    status = await agent.operator.agent_status("agent-1")
    return next((lane.state for lane in status.lanes if lane.lane == "edge"), None)


async def test_edge_out_of_session_tokens_pauses_its_reply_asks_and_goes_on(
    launch: Launch,  # noqa: F811
) -> None:
    agent = await launch(TALL, budgets={"total_session_tokens": 100})
    sent = await agent.operator.chat_send("agent-1", "count")
    asked = await question(agent)
    assert (asked.payload["budget"], asked.payload["lane"]) == ("total_session_tokens", "edge")
    assert (asked.payload["limit"], asked.payload["used"], asked.payload["unit"]) == (
        100,
        500,
        "tokens",
    )
    assert "job_name" not in asked.payload
    notice = await paused_notice(agent, sent.after_seq)
    assert notice["text"].startswith("edge is paused: the session exceeded total_session_tokens")

    async def waiting() -> bool:
        return await edge_state(agent) == "EDGE_WAITING_INFO"

    await poll_until(waiting, within=10)
    await agent.operator.approval_extend(asked.approval_id, 1000)
    reply = await replies_through(
        agent.operator, sent.after_seq, lambda r: r["category"] == "reply", within=20
    )
    assert reply[-1]["text"] == "Counted."
    assert any(
        r["text"] == "edge resumes: total_session_tokens extended by 1000 tokens" for r in reply
    )


async def test_edge_not_extended_ends_its_reply_with_why(launch: Launch) -> None:  # noqa: F811
    agent = await launch(TALL, budgets={"total_session_tokens": 100})
    sent = await agent.operator.chat_send("agent-1", "count")
    asked = await question(agent)
    await agent.operator.approval_reject(asked.approval_id)
    replies = await replies_through(
        agent.operator, sent.after_seq, lambda r: r["category"] == "error", within=20
    )
    assert replies[-1]["text"] == (
        "the session exceeded total_session_tokens (100); "
        f"the extension was refused ({asked.approval_id})"
    )
    assert replies[-1]["in_reply_to"] == sent.message_id

    async def idle() -> bool:
        return await edge_state(agent) == "EDGE_IDLE"

    await poll_until(idle, within=10)
