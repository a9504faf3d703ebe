"""kill -9 of an agent right after a `choir.fs.write` overwrite ran, before its result (§13.2).

An overwrite is the one write that is safe to run again (the same bytes again): its intent is
not made durable before it runs (`BuiltinTool.idempotent_when`), and a crash that leaves its
outcome unknown is not the operator's to decide. The agent is held at
`tool.after_run_before_result` after the file is written — long enough for the coalesced
heartbeat to carry the intent to choird — and killed there. After `agent start` resumes the
session: the chain and everything acknowledged are intact (issue 12's invariants), the model is
told the call may be run again, the user is told to resend, the file holds what was written,
and neither the recovery inbox nor `session recover` asks the operator about the call.
"""

from __future__ import annotations

import pytest

from choir.scripted import ReplyStep, ScriptedCall, ToolCallsStep
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import chat_error, checker_for, crash_report
from tests.harness.cluster import probe_step
from tests.harness.daemons import poll_until

# serial: the invariants hold the failure report to 5 s and the recovery to 10 s
pytestmark = [pytest.mark.slow, pytest.mark.serial]

HOLD_MS = 3000
PATH = "notes/plan.txt"
CONTENT = "the whole plan\n"
STEPS = [
    ToolCallsStep(
        match="[overwrite]",
        calls=[
            ScriptedCall(
                name="choir.fs.write",
                arguments={"path": PATH, "op": "overwrite", "content": CONTENT},
            )
        ],
    ),
    ReplyStep(after="tool", match="safe to call again", repeat=True, text="Will redo it."),
    probe_step(),
]


@pytest.mark.timeout(60)
async def test_a_crash_after_an_overwrite_leaves_it_to_run_again_not_to_the_operator(
    cluster_of: ClusterOf,
) -> None:
    cluster = await cluster_of(STEPS, heartbeat_interval_ms=500, crash_detection_threshold_ms=5000)
    spec = f"tool.after_run_before_result=sleep({HOLD_MS})"
    checker = checker_for(cluster, context=spec)
    started = await cluster.start("agent-1", failpoints=spec)
    session_id = str(started["session_id"])
    conversation = cluster.conversation("agent-1")
    sent = await conversation.send("please [overwrite]")
    written = cluster.workspace("agent-1") / PATH

    async def intent_stored() -> bool:
        intents = await checker.stored("tool_call_committed")
        return written.is_file() and any(e.payload["tool"] == "choir.fs.write" for e in intents)

    await poll_until(intent_stored, within=20)  # the heartbeat carried it while the agent waits
    await checker.observe()
    checker.fault(f"kill -9 of agent-1 at {spec}")
    await cluster.kill("agent-1")
    await checker.reported(crash_report(cluster.client, "agent-1"))

    resumed = await cluster.start("agent-1")
    assert (resumed["session_id"], resumed["resumed"]) == (session_id, True)
    await checker.healthy(lambda: cluster.answers("agent-1"))
    said = await checker.reported(chat_error(conversation, sent))
    assert "please send it again" in said.text

    verdict = await checker.verify(cluster.conversations.values())
    [intent] = [
        e for e in verdict.events("tool_call_committed") if e.payload["tool"] == "choir.fs.write"
    ]
    assert intent.payload["idempotent"] is True
    [result] = verdict.results(intent.payload["call_id"])
    assert result.payload["result"]["error_code"] == "outcome_unknown"
    assert "safe to call again" in result.payload["result"]["summary"]
    assert written.read_text() == CONTENT
    assert verdict.open_intents == []
    assert (await cluster.client.inbox_list(agent_id="agent-1")).items == []
    assert (await cluster.client.session_recover(session_id)).interrupted == []
