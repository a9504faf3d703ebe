"""The model misbehaving (§7.7): each fault explained to the user, the session healthy after.

The scripted model server answers each user message by its token: 429 with and without a usable
`Retry-After`, 5xx, provider-reported timeouts (408, 504), malformed bodies, a content filter,
and malformed tool calls (arguments that are not JSON, of the wrong type, an unknown tool name).
Per fault the checker times the explanation (an `error` reply naming the next step, within 5 s)
and the recovery (the next message answered normally, within 10 s, with nothing repaired), and
at the end holds the session to the invariants: no malformed call ran, nothing lost.

A model that never answers is given up on after its own `models.<name>.timeout_s` (hot-reloaded
here to 1 s; before, the deadline was a fixed 300 s): the user is told within 5 s, the agent's
log says so, and the next message is answered.
"""

from __future__ import annotations

import json
import re

import pytest

from choir.scripted import (
    HttpErrorStep,
    RateLimitStep,
    RawStep,
    ReplyStep,
    ScriptedCall,
    ToolCallsStep,
)
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import InvariantChecker, chat_error, checker_for
from tests.harness.cluster import EFFECT_TOOL, Cluster, probe_step
from tests.harness.daemons import poll_until
from tests.harness.homes import read_config, write_config

pytestmark = pytest.mark.slow

NO_CHOICES = '{"id": "x", "object": "chat.completion", "choices": []}'

STEPS = [
    RateLimitStep(match="[rl-once]", retry_after="1"),
    ReplyStep(match="[rl-once]", text="Answered after the wait."),
    RateLimitStep(match="[rl-twice]", retry_after="0"),
    RateLimitStep(match="[rl-twice]", retry_after="0"),
    RateLimitStep(match="[rl-long]", retry_after="600"),
    HttpErrorStep(match="[e500]", status=500, message="upstream exploded"),
    HttpErrorStep(match="[e503]", status=503),
    HttpErrorStep(match="[e408]", status=408),
    HttpErrorStep(match="[e504]", status=504),
    RawStep(match="[no-choices]", body=NO_CHOICES),
    RawStep(match="[not-json]", body="<html>bad gateway</html>", content_type="text/html"),
    ReplyStep(match="[filtered]", text="", finish_reason="content_filter"),
    ToolCallsStep(
        match="[bad-json]",
        calls=[ScriptedCall(name=EFFECT_TOOL, raw_arguments='{"token": "bad-json"')],
    ),
    ToolCallsStep(
        match="[bad-type]", calls=[ScriptedCall(name=EFFECT_TOOL, arguments={"token": 5})]
    ),
    ToolCallsStep(
        match="[unknown-tool]",
        calls=[ScriptedCall(name=EFFECT_TOOL, raw_name="no_such_tool", arguments={"token": "u"})],
    ),
    ReplyStep(after="tool", match="invalid_arguments", text="My arguments were not JSON."),
    ReplyStep(after="tool", match="invalid_input", text="My token was not a string."),
    ReplyStep(after="tool", match="unknown_tool", text="That tool does not exist."),
    ToolCallsStep(
        match="[core-500]",
        calls=[
            ScriptedCall(
                name="choir.core.spawn", arguments={"job_name": "doomed", "task_spec": "Fail."}
            )
        ],
    ),
    ReplyStep(after="tool", match="core job doomed started", text="Started doomed."),
    ReplyStep(match="[stall]", delay_ms=60_000, text="far too late"),
    probe_step(),
    # the core job's first request (no user or tool message): its model fails
    HttpErrorStep(status=500, message="core model down"),
]

MODEL_ERRORS = [
    ("rl-twice", "rate limited by its provider (HTTP 429, still limited after one retry)"),
    ("rl-long", "asked to wait 600 s, more than the 120 s allowed"),
    ("e500", "the provider failed (HTTP 500: upstream exploded); try again in a moment"),
    ("e503", "the provider failed (HTTP 503"),
    ("e408", "timed out (HTTP 408"),
    ("e504", "the provider failed (HTTP 504"),
    ("no-choices", "sent a malformed response (it has no choices)"),
    ("not-json", "sent a malformed response (the body is not JSON)"),
    ("filtered", "the provider's content filter blocked the answer; rephrase the request"),
]


async def started(cluster_of: ClusterOf) -> tuple[Cluster, InvariantChecker]:
    cluster = await cluster_of(STEPS)
    await cluster.start("agent-1")
    checker = checker_for(cluster)
    checker.fault("agent start")
    await checker.healthy(lambda: cluster.answers("agent-1"))
    return cluster, checker


@pytest.mark.timeout(60)
async def test_model_errors_are_explained_and_the_next_message_is_answered(
    cluster_of: ClusterOf,
) -> None:
    cluster, checker = await started(cluster_of)
    conversation = cluster.conversation("agent-1")
    for token, explained in MODEL_ERRORS:
        checker.fault(f"model fault {token}")
        sent = await conversation.send(f"please [{token}]")
        report = await checker.reported(chat_error(conversation, sent))
        assert explained in report.text
        await checker.healthy(lambda: cluster.answers("agent-1"))

    verdict = await checker.verify(cluster.conversations.values())
    assert verdict.lost_messages == []


@pytest.mark.timeout(60)
async def test_a_rate_limit_with_retry_after_is_waited_out_once_and_said(
    cluster_of: ClusterOf,
) -> None:
    cluster, checker = await started(cluster_of)
    conversation = cluster.conversation("agent-1")
    checker.fault("429 with Retry-After: 1")
    sent = await conversation.send("please [rl-once]")

    async def notice() -> str | None:
        said = [r for r in conversation.replies if r["category"] == "notice"]
        return str(said[0]["text"]) if said else None

    report = await checker.reported(notice, next_step=re.compile("trying once more in 1 s"))
    reply = await conversation.reply_to(sent)
    assert (reply["category"], reply["text"]) == ("reply", "Answered after the wait.")
    assert report.after_s < 1.0  # said before the wait, not after it
    requests = [r for r in cluster.model.requests if "[rl-once]" in str(r.body)]
    assert [r.status for r in requests] == [429, 200]
    await checker.verify(cluster.conversations.values())


@pytest.mark.timeout(60)
async def test_malformed_tool_calls_are_answered_and_never_run(cluster_of: ClusterOf) -> None:
    cluster, checker = await started(cluster_of)
    cases = [
        ("bad-json", "invalid_arguments", "call it again with a JSON object of arguments"),
        (
            "bad-type",
            "invalid_input",
            "token: 5 is not of type 'string'; give token as a string, then call test.effect again",
        ),
        ("unknown-tool", "unknown_tool", "call one of the offered tools by its exact name"),
    ]
    for token, code, explained in cases:
        checker.fault(f"malformed tool call {token}")
        _, reply = await cluster.say("agent-1", f"please [{token}]")
        assert reply["category"] == "reply"  # the model was told and answered the user

        async def stored_error(code: str = code) -> str | None:
            """What `choirctl session events` shows the operator for the call."""
            results = await checker.stored("tool_result_committed")
            found = [r for r in results if r.payload["result"]["error_code"] == code]
            return str(found[0].payload["result"]["summary"]) if found else None

        report = await checker.reported(stored_error, next_step=re.compile(re.escape(explained)))
        assert report.text.endswith(explained)
        await checker.healthy(lambda: cluster.answers("agent-1"))

    verdict = await checker.verify(cluster.conversations.values())
    assert verdict.effects == {}  # none of the malformed calls ran
    assert verdict.events("tool_call_committed") == []


@pytest.mark.timeout(60)
async def test_a_core_jobs_model_error_reaches_the_user(cluster_of: ClusterOf) -> None:
    cluster, checker = await started(cluster_of)
    conversation = cluster.conversation("agent-1")
    checker.fault("the core job's model call fails")
    _, reply = await cluster.say("agent-1", "please [core-500]")
    assert reply["text"] == "Started doomed."

    async def core_report() -> str | None:
        said = [r for r in conversation.replies if r["category"] == "core_report"]
        return str(said[0]["text"]) if said else None

    report = await checker.reported(core_report)
    assert report.text.startswith("core job doomed terminated: the model call failed")
    assert "HTTP 500: core model down" in report.text
    await checker.healthy(lambda: cluster.answers("agent-1"))
    verdict = await checker.verify(cluster.conversations.values())
    [stopped] = verdict.events("core_stopped")
    assert stopped.payload["outcome"] != "completed"


@pytest.mark.timeout(60)
async def test_a_model_that_does_not_answer_is_given_up_on_after_its_timeout(
    cluster_of: ClusterOf,
) -> None:
    cluster, checker = await started(cluster_of)
    data = read_config(cluster.home)
    data["models"]["demo"]["timeout_s"] = 1  # a hot reload: the running agent takes it
    write_config(cluster.home, data)
    await cluster.client.config_load()
    await cluster.client.config_apply()

    async def reloaded() -> bool:
        return not (await cluster.client.agent_status("agent-1")).config_behind

    await poll_until(reloaded, within=10)
    conversation = cluster.conversation("agent-1")
    checker.fault("the model does not answer")
    sent = await conversation.send("please [stall]")
    report = await checker.reported(chat_error(conversation, sent))
    assert report.text.endswith(
        "did not answer within 1 s (models.demo.timeout_s); try again, or choose a faster model"
    )
    assert report.after_s >= 0.9  # it was given its second
    await checker.healthy(lambda: cluster.answers("agent-1"))
    logged = [
        json.loads(line)
        for line in cluster.home.agent_log("agent-1").read_text().splitlines()
        if '"llm call failed"' in line
    ]
    assert [(line["kind"], line["model"]) for line in logged] == [("timeout", "demo")]
    await checker.verify(cluster.conversations.values())
