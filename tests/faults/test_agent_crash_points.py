"""kill -9 of an agent at each named failpoint (`choir.failpoints`), then resume (§13.2, §13.3).

One agent that choird started on the process runtime, a user message whose answer runs
`test.effect` (a non-idempotent append) on edge, or in a core job. The agent dies at the point:
`exit` makes it die there by itself; `sleep` holds it there while the test sends SIGKILL once
Postgres or the workspace shows it has arrived — a window of seconds, so the kill lands where it
is meant to. Then the operator does what the crash report says (`agent start`, which resumes
the session), and the checker holds choir to issue 12's invariants: chain intact, nothing
acknowledged lost, no side effect twice, reported within 5 s, healthy within 10 s. Per point,
what must have happened to the call:

- arbiter.after_append_before_ack: the intent never reached choird — the call never ran and
  the resumed agent does not run it (edge is never resumed mid-cycle).
- tool.after_intent_before_run / after_run_before_result: the intent is durable, the outcome
  unknown (not run / run once) — edge answers it `outcome_unknown` and tells the user to send
  the message again; a core job is held until the operator decides, and is never re-run.
- heartbeat.after_send_before_ack: choird stored the intent, the agent never saw the ack, so
  the tool never ran: `outcome_unknown`, not run.
- heartbeat.before_send: nothing after the last heartbeat reached choird; what was acknowledged
  before is intact and the agent serves on. The user's message was not durable in the agent's log
  yet, so choird delivers it again after the resume (its inbox): it is answered then, and its
  call runs then — once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

import pytest

from choir.scripted import ReplyStep, ScriptedCall, ToolCallsStep
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import InvariantChecker, Verdict, chat_error, checker_for, crash_report
from tests.harness.cluster import (
    EFFECT_TOOL,
    Cluster,
    SentMessage,
    effect_call,
    effect_turn,
    probe_step,
)
from tests.harness.daemons import poll_until

# serial: the invariants hold each failure report to 5 s and each recovery to 10 s; under
# parallel load on two cores the other workers' CPU use breaks those budgets, not choird.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

HOLD_MS = 3000
"""How long a `sleep` failpoint holds the agent at the point: the test kills it meanwhile."""
HEARTBEAT_HOLD_MS = 1500
"""Shorter for heartbeats: every heartbeat stalls, and the crash threshold must not fire."""
UNKNOWN = "may or may not have taken effect"
"""What the model is told about a call whose outcome a crash made unknown."""

STEPS = [
    *effect_turn("edge-1"),
    ToolCallsStep(
        match="[job]",
        calls=[
            ScriptedCall(
                name="choir.core.spawn",
                arguments={"job_name": "effector", "task_spec": "Append job-1."},
            )
        ],
    ),
    ReplyStep(after="tool", match="core job effector started", text="Started effector."),
    ReplyStep(after="tool", match="appended [job-1]", text="Appended job-1."),
    ReplyStep(after="tool", match=UNKNOWN, repeat=True, text="Checked the file; leaving it."),
    probe_step(),
    # a core job's first request has no user or tool message: only this step matches it
    ToolCallsStep(calls=[effect_call("job-1")]),
]

Until = Literal["exits", "intent_durable", "effect_written", "model_asked"]


@dataclass(frozen=True)
class Point:
    """One crash: where, on which lane, and what the call's fate must be."""

    failpoint: str
    action: str
    lane: Literal["edge", "core"]
    kill_when: Until
    """`exits`: the failpoint ends the agent itself; else SIGKILL once this is seen."""
    intent_durable: bool
    """Whether the effect's intent reached choird before the crash."""
    runs: int
    """`test.effect` runs: the call ran before the crash (1) or never (0)."""
    redelivered: bool = False
    """The user message was not durable at the crash: it is delivered again after the resume
    and its call runs then, once (issue 12, item 2)."""

    @property
    def spec(self) -> str:
        return f"{self.failpoint}={self.action}"


POINTS = [
    Point("arbiter.after_append_before_ack", "exit", "edge", "exits", False, 0),
    Point("tool.after_intent_before_run", "exit", "edge", "exits", True, 0),
    Point("tool.after_run_before_result", "exit", "edge", "exits", True, 1),
    Point("tool.after_intent_before_run", f"sleep({HOLD_MS})", "core", "intent_durable", True, 0),
    Point("tool.after_run_before_result", f"sleep({HOLD_MS})", "core", "effect_written", True, 1),
    Point(
        "heartbeat.after_send_before_ack",
        f"sleep({HEARTBEAT_HOLD_MS})",
        "edge",
        "intent_durable",
        True,
        0,
    ),
    Point(
        "heartbeat.before_send",
        f"sleep({HEARTBEAT_HOLD_MS})",
        "edge",
        "model_asked",
        False,
        0,
        True,
    ),
]


def point_id(point: Point) -> str:
    return f"{point.failpoint}-{point.lane}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("point", POINTS, ids=point_id)
async def test_a_kill_at_a_failpoint_loses_nothing_acknowledged_and_runs_nothing_twice(
    cluster_of: ClusterOf, point: Point
) -> None:
    cluster = await cluster_of(STEPS, heartbeat_interval_ms=500, crash_detection_threshold_ms=5000)
    checker = checker_for(cluster, context=point.spec)
    started = await cluster.start("agent-1", failpoints=point.spec)
    session_id = str(started["session_id"])
    conversation = cluster.conversation("agent-1")
    asked = len(cluster.model.requests)
    sent = await conversation.send("please [edge-1]" if point.lane == "edge" else "start the [job]")

    fault = f"kill -9 of agent-1 at {point.spec}"
    if point.kill_when == "exits":
        checker.fault(fault)  # it dies on its own, some time after this: timed from here
    await poll_until(arrived(cluster, checker, point, asked), within=20)
    await checker.observe()
    if point.kill_when != "exits":
        checker.fault(fault)
        await cluster.kill("agent-1")
    await checker.reported(crash_report(cluster.client, "agent-1"))
    ran = effect_lines(cluster)
    if not await message_durable(checker, sent):  # its user_msg was still in the agent's
        point = replace(point, redelivered=True)  # buffer: the message comes back, runs once

    resumed = await cluster.start("agent-1")  # what the report says to do; failpoints disarmed
    assert (resumed["session_id"], resumed["resumed"]) == (session_id, True)
    await checker.healthy(lambda: cluster.answers("agent-1"))
    if point.lane == "core" and point.intent_durable:
        await operator_decides(cluster, checker, session_id)
    elif point.intent_durable:
        said = await checker.reported(chat_error(conversation, sent))  # the user is told too
        assert "please send it again" in said.text

    if point.redelivered:
        assert (await conversation.reply_to(sent))["category"] == "reply"

    verdict = await checker.verify(cluster.conversations.values())
    assert ran == point.runs, f"test.effect ran {ran} times before the crash"
    assert effect_lines(cluster) == point.runs + point.redelivered  # and never twice
    assert verdict.open_intents == []
    check_the_call(verdict, point)


def arrived(
    cluster: Cluster, checker: InvariantChecker, point: Point, asked: int
) -> Callable[[], Awaitable[bool]]:
    """Whether the agent is at the point (or, for `exits`, already dead there)."""

    async def probe() -> bool:
        if point.kill_when == "exits":
            return await cluster.state("agent-1") == "crashed"
        if point.kill_when == "effect_written":
            return effect_lines(cluster) > 0
        if point.kill_when == "model_asked":
            return len(cluster.model.requests) > asked
        return await effect_intent_stored(checker)

    return probe


async def message_durable(checker: InvariantChecker, sent: SentMessage) -> bool:
    """Whether the message's `user_msg` reached choird before the crash."""
    received = await checker.stored("user_msg")
    return any(e.payload.get("message_id") == sent.message_id for e in received)


async def effect_intent_stored(checker: InvariantChecker) -> bool:
    intents = await checker.stored("tool_call_committed")
    return any(e.payload["tool"] == EFFECT_TOOL for e in intents)


async def operator_decides(cluster: Cluster, checker: InvariantChecker, session_id: str) -> None:
    """The held job shows in `session recover`; the operator resumes it; it completes."""
    listed = await cluster.client.session_recover(session_id)
    [held] = listed.interrupted
    assert (held.tool, held.job_name) == (EFFECT_TOOL, "effector")
    await asyncio.sleep(0.5)
    assert effect_lines(cluster) in (0, 1)  # held, not re-run while it waits
    decided = await cluster.client.session_recover(session_id, choice="resume")
    assert decided.requested is True
    await cluster.conversation("agent-1").wait_for(
        lambda r: r["category"] == "core_report", what="the held job's report"
    )


def check_the_call(verdict: Verdict, point: Point) -> None:
    """One intent at most for the effect call, and the result its fate calls for."""
    intents = [e for e in verdict.events("tool_call_committed") if e.payload["tool"] == EFFECT_TOOL]
    assert len(intents) == (1 if point.intent_durable or point.redelivered else 0)
    for intent in intents:
        [result] = verdict.results(intent.payload["call_id"])
        fate = None if point.redelivered else "outcome_unknown"  # redelivered: it simply ran
        assert result.payload["result"]["error_code"] == fate


def effect_lines(cluster: Cluster) -> int:
    path = cluster.effects("agent-1")
    return len(path.read_text().splitlines()) if path.exists() else 0
